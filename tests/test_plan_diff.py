"""The diff and its rules, as pure functions: no server."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from infra_cli.plan.desired import desired_resources, distribution_dependencies
from infra_cli.plan.kinds.cluster import live_comparable
from infra_cli.plan.diff import diff, drift, select_targets
from infra_cli.plan.smoke_pending import changed_smokes
from infra_cli.plan.live import LiveState
from infra_cli.conventions import TAG_HASH, TAG_STACK
from infra_cli.plan.model import Plan, Resource, content_hash
from infra_cli.commands.views.plan import render_plan
from infra_cli.stack.load import load_stack

STACK = """
stack: demo
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 2
    idle_time_before_scale_down: 900
    enable_node_public_ip: false
environments:
  img:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
  cur:
    curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest
distributions:
  ddp: {cluster: gpu, environment: img, type: pytorch, instance_count: 2, process_count_per_instance: 8}
"""


def load(tmp_path: Path, text: str = STACK, conda: str = "dependencies: [python=3.10]\n"):
    (tmp_path / "conda.yaml").write_text(conda)
    p = tmp_path / "stack.yaml"
    p.write_text(text)
    return load_stack(p)


def applied(desired: list[Resource]) -> LiveState:
    """The live state right after an apply: the desired attributes and tags, as the provider reads them back."""
    live = LiveState()
    for r in desired:
        if r.type == "cluster":
            live.of("cluster")[r.name] = r
        elif r.attributes["kind"] != "curated":
            attrs = dict(r.attributes, version="1", next_version="2")
            live.of("environment")[r.name] = Resource(r.address, r.type, r.name, attrs, r.tags)
    return live


def run(loaded, live, mode="normal"):
    return diff(desired_resources(loaded), live, stack="demo", source=loaded.source, mode=mode)


def test_new_stack_is_all_create(tmp_path):
    result = run(load(tmp_path), LiveState())
    actions = {c.address: c.actions for c in result.changes}
    assert actions == {"cluster.gpu": ["create"], "environment.img": ["create"], "environment.cur": ["no-op"]}
    assert not result.diagnostics


def test_after_apply_no_changes(tmp_path):
    loaded = load(tmp_path)
    result = run(loaded, applied(desired_resources(loaded)))
    assert all(c.actions == ["no-op"] for c in result.changes)


def test_scale_change_updates_in_place(tmp_path):
    live = applied(desired_resources(load(tmp_path)))
    result = run(load(tmp_path, STACK.replace("max_instances: 2", "max_instances: 4")), live)
    (change,) = [c for c in result.changes if c.address == "cluster.gpu"]
    assert change.actions == ["update"]
    assert change.replace_paths == []
    assert change.before["max_instances"] == 2 and change.after["max_instances"] == 4


def test_size_change_replaces_with_path(tmp_path):
    live = applied(desired_resources(load(tmp_path)))
    result = run(load(tmp_path, STACK.replace("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4")), live)
    (change,) = [c for c in result.changes if c.address == "cluster.gpu"]
    assert change.actions == ["delete", "create"]
    assert change.replace_paths == [["size"]]
    assert "vmSize" in change.action_reason


@pytest.mark.parametrize("edit,path", [
    ("enable_node_public_ip: false", "enable_node_public_ip"),
    ("idle_time_before_scale_down: 900\n    tier: low_priority", "tier"),
    ("idle_time_before_scale_down: 900\n    location: westus2", "location"),
])
def test_immutable_fields_force_replacement(tmp_path, edit, path):
    live = applied(desired_resources(load(tmp_path)))
    new = STACK.replace("enable_node_public_ip: false", "enable_node_public_ip: true") if path == "enable_node_public_ip" \
        else STACK.replace("idle_time_before_scale_down: 900", edit)
    (change,) = [c for c in run(load(tmp_path, new), live).changes if c.address == "cluster.gpu"]
    assert change.actions == ["delete", "create"]
    assert [path] in change.replace_paths


def test_removed_cluster_is_deleted_only_if_owned(tmp_path):
    loaded = load(tmp_path)
    live = applied(desired_resources(loaded))
    other = Resource("cluster.cpu", "cluster", "cpu", {"size": "Standard_D4_v3"}, {})
    live.of("cluster")["cpu"] = other  # no tag: not ours
    ours = Resource("cluster.old", "cluster", "old", {"size": "Standard_ND96asr_v4"}, {TAG_STACK: "demo"})
    live.of("cluster")["old"] = ours
    result = run(loaded, live)
    deletes = [c.address for c in result.changes if c.actions == ["delete"]]
    assert deletes == ["cluster.old"]


def test_untagged_same_name_is_an_error_not_a_delete(tmp_path):
    loaded = load(tmp_path)
    live = LiveState()
    live.of("cluster")["gpu"] = Resource("cluster.gpu", "cluster", "gpu", {"size": "Standard_ND96asr_v4"}, {})
    result = run(loaded, live)
    assert [d.rule for d in result.diagnostics] == ["plan.unmanaged-resource"]
    assert "infra import cluster.gpu gpu" in result.diagnostics[0].hint
    assert not any(c.address == "cluster.gpu" for c in result.changes)


def test_prevent_destroy_blocks_delete(tmp_path):
    loaded = load(tmp_path)
    live = applied(desired_resources(loaded))
    live.of("cluster")["old"] = Resource("cluster.old", "cluster", "old", {"prevent_destroy": True}, {TAG_STACK: "demo"})
    result = run(loaded, live)
    [d] = [d for d in result.diagnostics if d.rule == "plan.prevent-destroy"]
    # Not in the stack any more: no line to point at; the hint says how to get it back.
    assert d.line is None and "put clusters.old back in the stack" in d.hint


PROTECTED = STACK.replace("    enable_node_public_ip: false\n",
                          "    enable_node_public_ip: false\n    lifecycle: {prevent_destroy: true}\n")


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_stacks_prevent_destroy_protects_before_it_is_applied(tmp_path):
    """Live says unprotected (applied before the user added prevent_destroy): the stack as written wins."""
    live = applied(desired_resources(load(tmp_path)))
    for mode, text in (("destroy", PROTECTED), ("normal", PROTECTED.replace("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4"))):
        loaded = load(tmp_path, text)
        result = run(loaded, live, mode=mode)
        [d] = [d for d in result.diagnostics if d.rule == "plan.prevent-destroy"]
        assert "the stack sets lifecycle.prevent_destroy" in d.message, mode
        assert d.line == line_of(text, "prevent_destroy: true") and d.file == str(tmp_path / "stack.yaml")
        assert "put clusters.gpu back" not in d.hint


def test_a_replace_of_a_cluster_applied_with_prevent_destroy_points_at_it(tmp_path):
    live = applied(desired_resources(load(tmp_path, PROTECTED)))
    text = STACK.replace("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4")  # protection removed in the same edit
    result = run(load(tmp_path, text), live)
    [d] = [d for d in result.diagnostics if d.rule == "plan.prevent-destroy"]
    assert "must be replaced (size), but it was applied with lifecycle.prevent_destroy" in d.message
    assert (d.line, d.column) == (line_of(text, "  gpu:"), 3), "points at the cluster's key"


def test_ownership_errors_point_at_the_resource(tmp_path):
    loaded = load(tmp_path)
    live = LiveState()
    live.of("cluster")["gpu"] = Resource("cluster.gpu", "cluster", "gpu", {"size": "Standard_ND96asr_v4"},
                                    {TAG_STACK: "someone-else"})
    [d] = run(loaded, live).diagnostics
    assert d.rule == "plan.owned-by-other-stack" and (d.line, d.column) == (line_of(STACK, "  gpu:"), 3)


def test_conda_edit_plans_a_new_version(tmp_path):
    live = applied(desired_resources(load(tmp_path)))
    result = run(load(tmp_path, conda="dependencies: [python=3.11]\n"), live)
    (change,) = [c for c in result.changes if c.address == "environment.img"]
    assert change.actions == ["create"]
    assert change.after["version"] == "2" and change.before["version"] == "1"


def test_pinned_version_with_new_content_is_an_error(tmp_path):
    text = STACK.replace("conda_file: conda.yaml", "conda_file: conda.yaml\n    version: '1'")
    live = applied(desired_resources(load(tmp_path, text)))
    result = run(load(tmp_path, text, conda="dependencies: [python=3.12]\n"), live)
    assert "plan.environment-version-immutable" in [d.rule for d in result.diagnostics]


def test_destroy_mode_deletes_every_owned_cluster_and_releases_owned_environments(tmp_path):
    """Azure ML archives environment versions rather than delete them: destroy updates the stack's (archived,
    its ownership tags dropped), so nothing of it stays in `state list` and another stack may take the name."""
    loaded = load(tmp_path)
    result = run(loaded, applied(desired_resources(loaded)), mode="destroy")
    assert [(c.address, c.actions) for c in result.changes] == [("cluster.gpu", ["delete"]),
                                                                ("environment.img", ["update"])]
    assert result.changes[1].after["archived"] is True and "archived" in result.changes[1].action_reason
    other = diff(desired_resources(loaded), applied(desired_resources(loaded)), stack="other", source=loaded.source,
                 mode="destroy")
    assert other.changes == []  # never another stack's


def test_drift_reports_out_of_band_change(tmp_path):
    loaded = load(tmp_path)
    desired = desired_resources(loaded)
    live = applied(desired)
    assert drift(desired, live, stack="demo") == []
    gpu = live.of("cluster")["gpu"]
    live.of("cluster")["gpu"] = Resource(gpu.address, gpu.type, gpu.name, dict(gpu.attributes, max_instances=5), gpu.tags)
    (d,) = drift(desired, live, stack="demo")
    assert d.before["max_instances"] == 2 and d.after["max_instances"] == 5
    assert "max_instances" in d.action_reason


def test_targets_and_smoke_jobs(tmp_path):
    loaded = load(tmp_path)
    changes = run(loaded, LiveState()).changes
    deps = distribution_dependencies(loaded.stack)
    assert changed_smokes(changes, deps) == {"smoke.ddp": "cluster changed and environment changed"}
    assert [c.address for c in select_targets(changes, ["cluster.gpu"], deps)] == ["cluster.gpu"]
    assert {c.address for c in select_targets(changes, ["smoke.ddp"], deps)} == {"cluster.gpu", "environment.img"}


def test_render_terraform_style(tmp_path):
    live = applied(desired_resources(load(tmp_path)))
    result = run(load(tmp_path, STACK.replace("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4")
                      .replace("max_instances: 2", "max_instances: 3")), live)
    plan = Plan("demo", "normal", result.changes, [], [], "x")
    text = render_plan(plan)
    assert "-/+ resource \"cluster\" \"gpu\"" in text
    assert '~ size' in text and "# forces replacement" in text
    assert "Plan: 1 to add, 0 to change, 1 to destroy." in text
    assert "\033[" not in text
    # Terraform's words: a legend for the symbols this plan uses, no raw reason code, the forcing attribute marked
    assert text.startswith("Resource actions are indicated with the following symbols:\n"
                           "-/+ destroy and then create replacement\n\ninfra will perform the following actions:")
    assert "# cluster.gpu must be replaced" in text and "replace_because" not in text
    assert re.search(r"~ size\s+= \"Standard_ND96asr_v4\" -> \"Standard_ND96amsr_A100_v4\" # forces replacement", text)


def test_render_names_why_a_resource_goes_or_is_tainted(tmp_path):
    live = applied(desired_resources(load(tmp_path)))
    gone = run(load(tmp_path, STACK.split("clusters:")[0] + "clusters: {}\nenvironments: {}\ndistributions: {}\n"), live)
    text = render_plan(Plan("demo", "normal", gone.changes, [], [], "x"))
    assert "  - destroy\n" in text and "# cluster.gpu will be destroyed\n  # (because cluster.gpu is not in the stack)" in text
    gpu = live.of("cluster")["gpu"]
    live.of("cluster")["gpu"] = Resource(gpu.address, gpu.type, gpu.name, {**gpu.attributes, "provisioning_state": "Failed"},
                                    gpu.tags)
    text = render_plan(Plan("demo", "normal", run(load(tmp_path), live).changes, [], [], "x"))
    assert "# cluster.gpu is tainted, so must be replaced\n  # (provisioningState is Failed" in text


def test_secrets_never_in_desired(tmp_path):
    text = STACK.replace("enable_node_public_ip: false", "enable_node_public_ip: false\n    ssh_public_access_enabled: true\n"
                         "    ssh_settings: {admin_username: azureuser, ssh_key_value: ssh-rsa AAAASECRETKEY, admin_password: Hunter2!pass}")
    desired = desired_resources(load(tmp_path, text))
    blob = repr([r.to_json() for r in desired])
    assert "AAAASECRETKEY" not in blob and "Hunter2" not in blob
    cluster = next(r for r in desired if r.type == "cluster")
    assert cluster.attributes["ssh_credentials_hash"]
    assert cluster.tags[TAG_HASH] == content_hash(live_comparable(cluster.attributes))


def test_the_ssh_credentials_hash_is_hardened_and_never_shown(tmp_path):
    text = STACK.replace("enable_node_public_ip: false", "enable_node_public_ip: false\n    ssh_public_access_enabled: true\n"
                         "    ssh_settings: {admin_username: azureuser, admin_password: Hunter2!pass}")
    desired = desired_resources(load(tmp_path, text))
    cluster = next(r for r in desired if r.type == "cluster")
    digest = cluster.attributes["ssh_credentials_hash"]
    salt = b"infra-ssh/demo/gpu"
    assert digest == hashlib.scrypt(b"\0Hunter2!pass", salt=salt, n=2**14, r=8, p=1, maxmem=64 << 20, dklen=16).hex()
    assert digest != hashlib.sha256(b"demo/gpu\0\0Hunter2!pass").hexdigest()[:16], "not the fast hash any more"
    # A password change forces a replacement: shown as such, the values masked.
    live = applied(desired)
    changed = run(load(tmp_path, text.replace("Hunter2!pass", "Other!pass")), live)
    plan = Plan("demo", "normal", changed.changes, [], [], "x")
    rendered, as_json = render_plan(plan), json.dumps(plan.to_json())
    assert "ssh_credentials_hash" in rendered and "(sensitive value) -> (sensitive value) # forces replacement" in rendered
    for shown in (rendered, as_json):
        assert digest not in shown and "Hunter2" not in shown
    assert digest in json.dumps(plan.to_json(mask_sensitive=False)), "plan files keep it to compare at apply"
