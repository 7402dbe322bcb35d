"""A team's first week (issue 43), the command line's minor wrong turns: `-target` on apply and destroy with
Terraform's warning, a plan file that remembers it was made with `--local`, `-no-color`, and the Terraform
commands infra spells otherwise (`version`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from emulator_fixtures import WORKSPACE_YAML

STACK = f"""
stack: week
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 2
    infiniband: required
  cpu:
    size: Standard_D4s_v3
    max_instances: 1
environments:
  train:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
    requires: [openmpi>=4.1]
distributions:
  ddp: {{cluster: gpu, environment: train, type: pytorch, instance_count: 2, process_count_per_instance: 8}}
"""
TARGETING = "Resource targeting is in effect"


def _stack(tmp_path: Path) -> Path:
    (tmp_path / "conda.yaml").write_text("dependencies: [python=3.10]\n")
    path = tmp_path / "stack.yaml"
    path.write_text(STACK)
    return path


def _cli(*args, tmp_path: Path, **kw) -> subprocess.CompletedProcess:
    # no Azure sign-in reachable: a run that tried Azure would fail to sign in; AZUREML_CURRENT_CLOUD from an
    # in-process MLClient must not leak into the child
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD" and not k.startswith("AZURE_")}
    env["INFRA_LOCAL_DIR"] = str(tmp_path / "cloud")
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, **kw)


def _actions(tmp_path: Path, stack: Path) -> dict[str, list[str]]:
    r = _cli("plan", str(stack), "--local", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    return {c["address"]: c["change"]["actions"] for c in json.loads(r.stdout)["resource_changes"]}


def test_target_on_apply_and_destroy_with_terraforms_warning(tmp_path):
    stack = _stack(tmp_path)
    r = _cli("plan", str(stack), "-target=cluster.cpu", "--local", tmp_path=tmp_path)
    assert r.returncode == 0 and TARGETING in r.stderr, r.stderr
    assert "not for routine use" in r.stderr
    r = _cli("plan", str(stack), "--local", tmp_path=tmp_path)   # no targeting, no warning
    assert TARGETING not in r.stderr + r.stdout
    r = _cli("apply", str(stack), "-target=cluster.cpu", "--local", "--auto-approve", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    assert TARGETING in r.stderr and "Resources: 1 added, 0 changed, 0 destroyed." in r.stdout
    assert _actions(tmp_path, stack) == {"cluster.cpu": ["no-op"], "cluster.gpu": ["create"],
                                         "environment.train": ["create"]}
    r = _cli("apply", str(stack), "--local", "--auto-approve", tmp_path=tmp_path)   # the smoke runs, recorded
    assert r.returncode == 0, r.stderr + r.stdout
    # destroy -target: the target alone goes (nothing runs on the cpu cluster), the rest and the records stay
    r = _cli("destroy", str(stack), "--target", "cluster.cpu", "--local", "--auto-approve", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    assert TARGETING in r.stderr and "Destroy complete! Resources: 1 destroyed." in r.stdout
    assert _actions(tmp_path, stack) == {"cluster.cpu": ["create"], "cluster.gpu": ["no-op"],
                                         "environment.train": ["no-op"]}
    r = _cli("plan", str(stack), "--local", "--json", tmp_path=tmp_path)
    assert json.loads(r.stdout)["smoke_jobs"] == []   # the smoke's record was not retired with the target


def test_destroy_target_takes_what_depends_on_it_not_what_it_depends_on(tmp_path):
    from infra_cli.plan.diff import select_targets
    from infra_cli.plan.model import ResourceChange

    changes = [ResourceChange(address=a, type=a.split(".")[0], name=a.split(".")[1], actions=["delete"],
                              before={}, after=None) for a in ("cluster.gpu", "environment.train", "smoke.ddp")]
    deps = {"smoke.ddp": ("cluster.gpu", "environment.train")}
    kept = [c.address for c in select_targets(changes, ["cluster.gpu"], deps, destroying=True)]
    assert kept == ["cluster.gpu", "smoke.ddp"]
    kept = [c.address for c in select_targets(changes, ["smoke.ddp"], deps)]
    assert kept == ["cluster.gpu", "environment.train", "smoke.ddp"]


def test_target_address_grammar_and_saved_plan(tmp_path):
    stack = _stack(tmp_path)
    r = _cli("apply", str(stack), "-target=cluster.no such", "--local", "--auto-approve", tmp_path=tmp_path)
    assert r.returncode == 1 and "--target" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _cli("destroy", str(stack), "-target=cluster.nope", "--local", "--auto-approve", tmp_path=tmp_path)
    assert r.returncode == 1 and "is not an address of this stack" in r.stderr, r.stderr
    plan = tmp_path / "p.plan"
    r = _cli("plan", str(stack), "--local", f"-out={plan}", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    r = _cli("apply", str(plan), "-target=cluster.cpu", "--local", tmp_path=tmp_path)
    assert r.returncode == 1 and "a saved plan takes no --target" in r.stderr, r.stderr


def test_a_plan_made_with_local_applies_to_the_local_azure(tmp_path):
    stack = _stack(tmp_path)
    plan = tmp_path / "prod.plan"
    r = _cli("plan", str(stack), "--local", "--target", "cluster.cpu", "--out", str(plan), tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(plan.read_text())["local"] is True
    r = _cli("apply", str(plan), tmp_path=tmp_path)   # no --local: the plan remembers its cloud
    assert r.returncode == 0, r.stderr + r.stdout
    assert "Resources: 1 added, 0 changed, 0 destroyed." in r.stdout
    assert _actions(tmp_path, stack)["cluster.cpu"] == ["no-op"]


def test_the_plans_cloud_is_sealed_and_checked(tmp_path):
    from infra_cli.apply.engine import prepare_from_plan_file
    from infra_cli.commands.backend import provider_for
    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.plan.planfile import content_digest

    stack = _stack(tmp_path)
    plan = tmp_path / "p.plan"
    assert _cli("plan", str(stack), "--local", "--out", str(plan), tmp_path=tmp_path).returncode == 0
    # the engine refuses a local plan handed a backend that is not the local Azure (as apply without the record)
    try:
        prepare_from_plan_file(plan, backend=provider_for(local=True), key=None, local=False)
    except DiagnosticError as exc:
        assert [d.rule for d in exc.diagnostics] == ["apply.plan-cloud"]
    else:
        raise AssertionError("a local plan was prepared for Azure")
    body = json.loads(plan.read_text())
    # the record is sealed: flipping it without the digest is refused as a changed file
    body["local"] = False
    plan.write_text(json.dumps(body))
    r = _cli("apply", str(plan), "--local", tmp_path=tmp_path)
    assert r.returncode == 1 and "planfile.changed" in r.stderr, r.stderr
    body["local"] = "yes"
    del body["digest"]
    body["digest"] = content_digest(body)
    plan.write_text(json.dumps(body))
    r = _cli("apply", str(plan), "--local", tmp_path=tmp_path)
    assert r.returncode == 1 and "local is true or false" in r.stderr, r.stderr


def test_terraforms_other_commands_say_what_to_run(tmp_path):
    from infra_cli import __version__

    r = _cli("version", tmp_path=tmp_path)   # Terraform's spelling of --version
    assert r.returncode == 0 and r.stdout == _cli("--version", tmp_path=tmp_path).stdout and __version__ in r.stdout
    r = _cli("fmt", tmp_path=tmp_path)
    assert r.returncode == 1 and "infra validate STACK" in r.stderr, r.stderr
    r = _cli("state", "show", "cluster.gpu", "stack.yaml", tmp_path=tmp_path)
    assert r.returncode == 1 and "`infra show STACK`" in r.stderr and "live attributes" in r.stderr, r.stderr
    r = _cli("state", "bogus", tmp_path=tmp_path)   # a command neither infra's nor Terraform's: click's words
    assert r.returncode == 1 and "No such command 'bogus'." in r.stderr, r.stderr


def test_chdir_runs_the_command_in_dir(tmp_path):
    stack = _stack(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for spelling in (["-chdir=" + str(tmp_path)], ["--chdir", str(tmp_path)]):
        r = _cli(*spelling, "validate", stack.name, tmp_path=tmp_path, cwd=elsewhere)
        assert r.returncode == 0 and "1 stack file(s) valid" in r.stderr, r.stderr
    r = _cli("validate", stack.name, tmp_path=tmp_path, cwd=elsewhere)   # without it: not found
    assert r.returncode == 1
    r = _cli("-chdir=" + str(tmp_path / "nope"), "validate", "stack.yaml", tmp_path=tmp_path)
    assert r.returncode == 1 and "cannot change to" in r.stderr and "Traceback" not in r.stderr, r.stderr


def _on_a_terminal(*args, tmp_path: Path) -> str:
    """What the command writes when its stdout and stderr are a terminal (a pseudo-terminal), TERM and NO_COLOR
    as a colour terminal's."""
    import pty

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "NO_COLOR")}
    env.update(INFRA_LOCAL_DIR=str(tmp_path / "cloud"), TERM="xterm-256color")
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", *args], stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:   # EIO: the command closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(leader)
    return out.decode(errors="replace")


def test_no_color_on_a_terminal(tmp_path):
    stack = _stack(tmp_path)
    coloured = _on_a_terminal("plan", str(stack), "--local", "-target=cluster.cpu", tmp_path=tmp_path)
    assert "\033[" in coloured and "cluster.cpu" in coloured   # a terminal that wants colour gets it
    for flag in ("-no-color", "--no-color"):
        plain = _on_a_terminal("plan", str(stack), "--local", "-target=cluster.cpu", flag, tmp_path=tmp_path)
        assert "cluster.cpu" in plain and TARGETING in plain and "\033[" not in plain, plain
    plain = _on_a_terminal("validate", str(stack), "-no-color", tmp_path=tmp_path)
    assert "valid" in plain and "\033[" not in plain


def test_a_cluster_without_a_price_is_unknown_never_zero_dollars():
    from test_plan_cost import change, cluster, plan

    from infra_cli.commands.views.plan import render_plan

    # a CPU size the catalog keeps no price for: the total is unknown, not $0.00
    text = render_plan(plan(change(["create"], None, cluster(size="Standard_D4s_v3"), name="cpu")))
    [line] = [ln for ln in text.splitlines() if ln.startswith("Cost at max_instances")]
    assert "$0.00" not in line and line.startswith("Cost at max_instances: price unknown") and \
        "Standard_D4s_v3" in line and "1 cluster price unknown" in line, line
    # beside a priced one: at least the priced total
    text = render_plan(plan(change(["create"], None, cluster(size="Standard_D4s_v3"), name="cpu"),
                            change(["create"], None, cluster(), name="gpu")))
    [line] = [ln for ln in text.splitlines() if ln.startswith("Cost at max_instances")]
    assert line.startswith("Cost at max_instances: at least $") and "(was $0.00/hour)" in line, line
    # an unpriced cluster's size changed to another unpriced one: neither side is $0.00
    text = render_plan(plan(change(["update"], cluster(size="Standard_D4s_v3"), cluster(size="Standard_D8s_v3"),
                                   name="cpu")))
    [line] = [ln for ln in text.splitlines() if ln.startswith("Cost at max_instances")]
    assert "$0.00" not in line, line


def _syntax_error(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    r = _cli("validate", str(path), "--json", tmp_path=tmp_path)
    assert r.returncode == 1, r.stderr
    [d] = json.loads(r.stdout)["diagnostics"]
    assert d["rule"] == "stack.syntax" and "Traceback" not in r.stderr
    return d


def test_yaml_indentation_errors_at_the_offending_line_in_plain_words(tmp_path):
    d = _syntax_error(tmp_path, "stack: a\nworkspace:\n  name: w\n   location: eastus\n")
    assert (d["line"], d["column"]) == (4, 4) and "`location:` is indented more than `name:`" in d["message"]
    assert "indent `location:` 2 spaces" in d["hint"]
    d = _syntax_error(tmp_path, "stack: a\nclusters:\n  gpu:\n    size: x\n   max_instances: 2\n  cpu:\n    size: y\n")
    assert (d["line"], d["column"]) == (5, 4) and "`max_instances:` is indented 3 spaces" in d["message"]
    assert "(0, 2 or 4 spaces)" in d["hint"]
    # the key dedented below its siblings, then one indented under it: the first wrong line is named
    d = _syntax_error(tmp_path, "stack: a\nclusters:\n  gpu:\n    size: x\n  max_instances: 2\n    tier: low\n")
    assert d["line"] == 6 and "`tier:` is indented more than `max_instances:`" in d["message"]
    for words in ("did not find expected key", "mapping values are not allowed", "cannot start any token"):
        assert words not in d["message"]


def test_a_tab_is_named_as_a_tab(tmp_path):
    d = _syntax_error(tmp_path, "stack: a\nworkspace:\n  name: w\n\tlocation: eastus\n")
    assert (d["line"], d["column"]) == (4, 1) and "a tab" in d["message"] and "spaces only" in d["message"]
    assert "cannot start any token" not in d["message"]
    d = _syntax_error(tmp_path, "stack: a\nworkspace:\n  \tname: w\n")
    assert (d["line"], d["column"]) == (3, 3) and "a tab" in d["message"]


def test_other_yaml_errors_keep_pyyamls_words_at_its_mark(tmp_path):
    # a list beside the keys: not judged by indentation, PyYAML's own words and place
    d = _syntax_error(tmp_path, "stack: a\nclusters:\n  gpu:\n    size: x\n    max_instances:\n    - 2\n   tier: low\n")
    assert d["line"] == 7 and d["message"].startswith("YAML syntax error: did not find expected key")
    d = _syntax_error(tmp_path, "stack: [a\n")
    assert d["message"].startswith("YAML syntax error: ") and "indented" not in d["message"]


def _validated_size(tmp_path: Path, size: str) -> list[dict]:
    stack = _stack(tmp_path)
    stack.write_text(STACK.replace("size: Standard_ND96asr_v4", f"size: {size}"))
    r = _cli("validate", str(stack), "--json", tmp_path=tmp_path)
    return [d for d in json.loads(r.stdout)["diagnostics"] if d["rule"] == "cluster.size-unknown"]


def test_a_misspelt_size_is_an_error_with_a_did_you_mean(tmp_path):
    for size in ("Standard_ND96asrv4", "ND96asr_v4", "Standard_DN96asr_v4", "nd96asrv4"):
        [d] = _validated_size(tmp_path, size)
        assert d["severity"] == "error" and "did you mean 'Standard_ND96asr_v4'?" in d["message"], (size, d)
    assert _validated_size(tmp_path, "standard_nd96asr_v4") == []   # Azure reads a size in any case
    # a CPU size (the catalog's general-purpose ones) alike
    [d] = _validated_size(tmp_path, "D4s_v3")
    assert "did you mean 'Standard_D4s_v3'?" in d["message"]


def test_written_alike_names_one_size_or_none():
    from infra_cli.knowledge.size_name import written_alike

    known = ["Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_NC24ads_A100_v4"]
    assert written_alike("Standard_DN96asr_v4", known) == "Standard_ND96asr_v4"
    assert written_alike("ND96amsrA100v4", known) == "Standard_ND96amsr_A100_v4"
    assert written_alike("Standard_ND96asr_v4", known) is None   # itself: nothing to suggest
    assert written_alike("Standard_ND69asr_v4", ["Standard_ND96asr_v4", "Standard_ND69asr_v4"]) is None
    assert written_alike("Standard_NV12s_v3", known) is None
    assert written_alike("Standard_ND96asr_v4", ["Standard_ND96ars_v4", "Standard_ND96sar_v4"]) is None  # two


def test_plan_calls_a_size_no_region_offers_unknown(tmp_path):
    stack = _stack(tmp_path)
    stack.write_text(STACK.replace("size: Standard_ND96asr_v4", "size: Standard_ND96isr_Z900_v9")
                     .replace("    infiniband: required\n", ""))
    r = _cli("plan", str(stack), "--local", "--json", tmp_path=tmp_path)
    [d] = [d for d in json.loads(r.stdout)["diagnostics"] if d["rule"] == "preflight.size-unavailable"]
    assert "unknown size Standard_ND96isr_Z900_v9" in d["message"] and "not in the SKU catalog" in d["message"]
    # a catalogued size the region lacks is still "not offered in" it
    stack.write_text(STACK.replace("location: eastus", "location: westeurope")
                     .replace("size: Standard_ND96asr_v4", "size: Standard_ND96isr_H200_v5"))
    r = _cli("plan", str(stack), "--local", "--json", tmp_path=tmp_path)
    said = [d["message"] for d in json.loads(r.stdout)["diagnostics"] if d["rule"] == "preflight.size-unavailable"]
    assert all("unknown size" not in m for m in said), said


ADOPTED = f"""stack: owner
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 2
    ssh_settings: {{admin_username: azureuser, admin_password: "Not-the-generated-one-1"}}
"""
ADOPTING = f"""stack: adopt
{WORKSPACE_YAML}import:
  - {{to: cluster.gpu, id: gpu}}
environments:
  train:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
distributions:
  ddp: {{cluster: gpu, environment: train, type: pytorch, instance_count: 2, process_count_per_instance: 8}}
outputs:
  gpu_id: {{value: "${{cluster.gpu.id}}"}}
"""


def test_generate_config_out_writes_while_references_remain(tmp_path):
    import yaml

    owner, stack, generated = _stack(tmp_path), tmp_path / "adopt.yaml", tmp_path / "generated.yaml"
    owner.write_text(ADOPTED)
    assert _cli("apply", str(owner), "--local", "--auto-approve", "--no-smoke", tmp_path=tmp_path).returncode == 0
    assert _cli("state", "rm", "cluster.gpu", str(owner), "--local", tmp_path=tmp_path).returncode == 0
    stack.write_text(ADOPTING)
    r = _cli("plan", str(stack), "--local", "--generate-config-out", str(generated), tmp_path=tmp_path)
    # the references still dangle (exit 1), but the declarations are written, and no hint repeats this command
    assert r.returncode == 1 and generated.is_file(), r.stdout + r.stderr
    assert "wrote them to" in r.stdout and "import.undeclared" not in r.stderr and "--generate-config-out" not in r.stderr
    assert "distribution.dangling-reference" in r.stderr
    text = generated.read_text()
    body = yaml.safe_load(text)
    assert body["variables"] == {"gpu_admin_password": {"type": "string", "sensitive": True}}
    gpu = body["clusters"]["gpu"]
    assert gpu["ssh_settings"]["admin_password"] == "${var.gpu_admin_password}" and "ADMIN_PASSWORD}" not in text
    assert gpu["infiniband"] == "required"   # Standard_ND96asr_v4 has InfiniBand NCCL uses
    assert "Not-the-generated-one-1" not in text + r.stdout + r.stderr
    # each remaining error names the declaration at the generated file's line and the step that resolves it
    lines = text.splitlines()
    entry = f"{generated}:{lines.index('  gpu:') + 1}:3"
    placeholder = next(i for i, line in enumerate(lines) if "${var.gpu_admin_password}" in line) + 1
    for rule in ("output.unknown-address", "distribution.dangling-reference"):
        [said] = [block for block in r.stderr.split("\n/") if f"error[{rule}]" in block]
        assert f"{entry} declares it, generated but not merged" in said, said
        assert f"hint: merge the `gpu:` entry of {generated} into the `clusters:` of {stack}" in said
        assert "then plan with `--var gpu_admin_password=...`" in said
    assert f"{generated}:{placeholder}:23: warning[generate-config.placeholder]" in r.stderr
    # merged, the stack plans: the import, with the password given as the variable the file declared
    merged = yaml.safe_load(ADOPTING)
    merged.update(variables=body["variables"], clusters=body["clusters"])
    stack.write_text(yaml.safe_dump(merged, sort_keys=False))
    r = _cli("plan", str(stack), "--local", "--var", "gpu_admin_password=Not-the-generated-one-1", tmp_path=tmp_path)
    assert r.returncode == 0 and "# cluster.gpu will be imported" in r.stdout, r.stdout + r.stderr


def test_generate_config_out_placeholder_at_its_line_when_the_plan_succeeds(tmp_path):
    owner, stack, generated = _stack(tmp_path), tmp_path / "adopt.yaml", tmp_path / "generated.yaml"
    owner.write_text(ADOPTED)
    assert _cli("apply", str(owner), "--local", "--auto-approve", "--no-smoke", tmp_path=tmp_path).returncode == 0
    assert _cli("state", "rm", "cluster.gpu", str(owner), "--local", tmp_path=tmp_path).returncode == 0
    stack.write_text(ADOPTING.split("environments:")[0])   # nothing references cluster.gpu yet
    r = _cli("plan", str(stack), "--local", "--json", "--generate-config-out", str(generated), tmp_path=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    [d] = [d for d in json.loads(r.stdout)["diagnostics"] if d["rule"] == "generate-config.placeholder"]
    line = next(i for i, text in enumerate(generated.read_text().splitlines()) if "${var.gpu_admin_password}" in text)
    assert (d["severity"], d["file"], d["line"], d["column"]) == ("warning", str(generated), line + 1, 23), d
    assert "--var gpu_admin_password=..." in d["hint"] and str(stack) in d["hint"]
    assert "--generate-config-out" not in d["hint"] + d["message"]


def test_indentation_judged_past_keys_without_values_and_lists(tmp_path):
    # a key without a value (null) before the wrong line is no error of its own
    d = _syntax_error(tmp_path, "stack: a\nworkspace:\nclusters:\n  gpu:\n    size: x\n   max_instances: 1\n")
    assert d["line"] == 6 and "`max_instances:` is indented 3 spaces" in d["message"], d
    # a list earlier in the file: the keys after it are judged, the list lines are not
    d = _syntax_error(tmp_path, "stack: a\nlist:\n  - x\n  - y\nworkspace:\n  name: w\n location: e\n")
    assert d["line"] == 7 and "`location:` is indented 1 space," in d["message"], d
