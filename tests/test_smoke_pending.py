"""Smoke results count in the plan (Terraform's "tainted"): a distribution whose last smoke failed, never ran,
or ran on other inputs shows as `smoke.NAME will run` with why; apply reruns it; a pass leaves the plan clean.
The record lives on Azure (an environment version per record, through the SDK), never in a local file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_registry_environments import WORKSPACE

from infra_cli.plan.smoke_pending import LAST_FAILED, NEVER_RAN, pending_smokes
from infra_cli.state.records import FAILED, INCOMPLETE, PASSED, PENDING, SmokeInputs, SmokeRecord

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.runs_jobs   # jobs on the emulator: scheduled first (tests/conftest.py)

NOW = SmokeInputs("c1", "e1", "d1")


@pytest.mark.parametrize("record, expected", [
    (None, NEVER_RAN),
    (SmokeRecord("ddp", FAILED, NOW, "job-7"), f"{LAST_FAILED}: job job-7"),
    (SmokeRecord("ddp", PENDING, None, reason="cluster changed"), "cluster changed, never ran since"),
    (SmokeRecord("ddp", PASSED, SmokeInputs("c0", "e1", "d1")), "cluster changed since the last passing smoke"),
    (SmokeRecord("ddp", PASSED, SmokeInputs("c1", "e0", "d0")),
     "environment changed and distribution changed since the last passing smoke"),
    (SmokeRecord("ddp", PASSED, NOW), None),
    # pending until it passes, so -detailed-exitcode exits 2 each time: the way out is said, not only the cause
    (SmokeRecord("ddp", INCOMPLETE, NOW, reason="deepspeed is not installed where the job ran"),
     "last smoke incomplete: deepspeed is not installed where the job ran; install what it lacks where its job "
     "runs, or set `smoke: {enabled: false}` on distributions.ddp to plan without it"),
])
def test_why_a_smoke_is_pending(record, expected):
    pending = pending_smokes({"ddp": NOW}, {"ddp": record}, {"ddp"})
    assert pending.get("smoke.ddp") == expected
    assert pending_smokes({"ddp": NOW}, {"ddp": record}, set()) == {}  # smoke disabled: never pending


def test_a_clusters_smoke_input_is_what_forces_its_replacement(tmp_path):
    """Scale settings, tags and description change in place on the same nodes: the input a passing smoke was
    recorded with still holds. Size, tier or network make new nodes: it no longer does."""
    from infra_cli.plan.desired import desired_resources
    from infra_cli.plan.smoke_pending import smoke_inputs
    from infra_cli.stack.load import load_stack

    def cluster_input(text: str) -> str:
        path = tmp_path / "s.yaml"
        path.write_text(text)
        loaded = load_stack(path)
        return smoke_inputs(loaded, desired_resources(loaded), lambda _: "resolved")["ddp"].cluster

    base = cluster_input(STACK)
    in_place = STACK.replace("max_instances: 2", "max_instances: 4\n    min_instances: 1\n"
                             "    idle_time_before_scale_down: 60\n    description: bigger\n    tags: {team: a}")
    assert cluster_input(in_place) == base
    for forcing in ("size: Standard_ND96amsr_A100_v4", "tier: low_priority", "enable_node_public_ip: false\n"
                    "    network_settings: {subnet: /subscriptions/x/resourceGroups/r/providers/Microsoft.Network/"
                    "virtualNetworks/v/subnets/s}"):
        changed = STACK.replace("size: Standard_ND96asr_v4", forcing if forcing.startswith("size")
                                else "size: Standard_ND96asr_v4\n    " + forcing)
        assert cluster_input(changed) != base, forcing


def test_a_disabled_smoke_does_not_run_whatever_changed(tmp_path):
    """`smoke: {enabled: false}` ("run the smoke job after apply": no) was ignored when the plan created the
    cluster: apply ran a 2-node smoke job anyway."""
    state, path = tmp_path / "state", tmp_path / "stack.yaml"
    path.write_text(STACK + "    smoke: {enabled: false}\n")
    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 2 and "+ resource \"cluster\" \"gpu\"" in r.stdout and "smoke.ddp" not in r.stdout, r.stdout
    assert plan_json(path, state)["smoke_jobs"] == []


def test_inputs_survive_a_tag_round_trip():
    assert SmokeInputs.decode(NOW.encode()) == NOW
    assert len(NOW.encode()) <= 256
    for broken in (None, "", "cluster=a", "garbage"):
        assert SmokeInputs.decode(broken) is None


def test_record_is_on_azure_and_read_back(clients):
    from infra_cli.azure.provider import AzureProvider, smoke_record_name
    from infra_cli.plan.live import read_live
    from infra_cli.state.store import StateStore

    provider = AzureProvider(clients)

    def read_smoke_records(provider, stack, distributions):   # as plan reads them, beside the live state
        return read_live(provider, [], stack=stack, distributions=distributions).records

    assert read_smoke_records(provider, "st", ["ddp"]) == {"ddp": None}
    StateStore(provider).record_smoke("st", SmokeRecord("ddp", FAILED, NOW, "job-1", "2026-01-01T00:00:00Z"))
    StateStore(provider).record_smoke("st", SmokeRecord("ddp", PASSED, NOW, "job-2", "2026-01-01T00:01:00Z"))
    record = read_smoke_records(provider, "st", ["ddp"])["ddp"]
    assert (record.result, record.inputs, record.job) == (PASSED, NOW, "job-2")
    # an environment version per record, readable with the plain SDK
    versions = [e.version for e in clients.ml.environments.list(name=smoke_record_name("st", "ddp"))]
    assert sorted(versions) == ["1", "2"]
    # another stack's record under a name that sanitises alike is not this one's
    StateStore(provider).record_smoke("st", SmokeRecord("a b", PASSED, NOW, "job-3"))
    assert read_smoke_records(provider, "st", ["a-b"]) == {"a-b": None}
    assert read_smoke_records(provider, "st", ["a b", "a-b"])["a b"].job == "job-3", "one list serves both"


STACK = "\nstack: pending\n" + WORKSPACE + """clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 2
environments:
  acpt:
    curated: azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/labels/latest
distributions:
  ddp:
    cluster: gpu
    environment: acpt
    type: pytorch
    framework: ddp
    instance_count: 1
    process_count_per_instance: 2
"""
# gloo cannot find an interface that does not exist: the smoke fails fast, as on a node without that NIC
BREAKS_IT = "    environment_variables: {GLOO_SOCKET_IFNAME: nosuchnic0}\n"


def infra(*args: str, state: Path) -> subprocess.CompletedProcess:
    """The CLI run from a directory of the test's own (`workdir`), so nothing a user's run left in the
    repository (./.infra after the quick start) is read, and whatever the CLI writes locally can be seen."""
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env.update(INFRA_LOCAL_DIR=str(state), INFRA_EMULATOR_PROVISIONING_DELAY_S="0.1",
               # this checkout's infra, not another one installed (the command runs outside the checkout)
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    cwd = workdir(state)
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def workdir(state: Path) -> Path:
    return state.parent / "cwd"


def plan_json(path: Path, state: Path) -> dict:
    r = infra("plan", str(path), "--local", "--json", state=state)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_failed_smoke_is_pending_until_apply_reruns_it_and_it_passes(tmp_path):
    """On the emulator, with a registry environment: a smoke that fails (an environment variable breaks
    it), then passes once the stack is fixed; the plan between says so and exits 2."""
    state, path = tmp_path / "state", tmp_path / "stack.yaml"
    path.write_text(STACK + BREAKS_IT)
    r = infra("apply", str(path), "--local", "--auto-approve", state=state)
    assert r.returncode == 1, r.stdout + r.stderr  # the smoke failed
    assert "smoke.ddp: FAILED" in r.stdout and "# smoke.ddp will run (cluster changed)" in r.stdout
    # where its logs are: a folder kept after the run, each rank's std_log in it
    (logs_line,) = [line for line in r.stdout.splitlines() if line.startswith("  logs:   ")]
    kept = Path(logs_line.split()[1])
    try:
        assert list(kept.rglob("user_logs/std_log*.txt")), sorted(kept.rglob("*"))
        assert "'s user_logs/ and outputs/, downloaded" in logs_line
    finally:
        shutil.rmtree(kept, ignore_errors=True)

    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "No changes. Your infrastructure matches the stack." not in r.stdout
    assert "# smoke.ddp will run (last smoke failed: job " in r.stdout
    body = plan_json(path, state)
    assert body["smoke_jobs"] == ["smoke.ddp"]
    assert body["smoke_reasons"]["smoke.ddp"].startswith(LAST_FAILED)
    assert all(c["change"]["actions"] == ["no-op"] for c in body["resource_changes"])
    assert not any(workdir(state).iterdir()) and not list(tmp_path.glob("*smoke*"))  # nothing local

    path.write_text(STACK)  # fixed: apply changes no resource, reruns the smoke, which passes
    r = infra("apply", str(path), "--local", "--auto-approve", state=state)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "smoke.ddp: PASSED" in r.stdout and "Smoke jobs after apply:" in r.stdout
    assert "Apply complete!" not in r.stdout  # nothing to lock or change: only the smoke ran

    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 0 and "No changes. Your infrastructure matches the stack." in r.stdout, r.stdout
    assert plan_json(path, state)["smoke_jobs"] == []

    # a scale change is made in place on the nodes the smoke proved: it runs no smoke (a paid node-hour)
    path.write_text(STACK.replace("max_instances: 2", "max_instances: 3"))
    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 2 and "~ max_instances" in r.stdout and "smoke.ddp" not in r.stdout, r.stdout
    r = infra("apply", str(path), "--local", "--auto-approve", state=state)
    assert r.returncode == 0 and "smoke.ddp" not in r.stdout, r.stdout + r.stderr
    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 0, r.stdout

    # a replacement applied without its smoke leaves the smoke pending, with why
    path.write_text(STACK.replace("max_instances: 2", "max_instances: 3").replace(
        "size: Standard_ND96asr_v4", "size: Standard_ND96amsr_A100_v4"))
    r = infra("apply", str(path), "--local", "--auto-approve", "--no-smoke", state=state)
    assert r.returncode == 0, r.stdout + r.stderr
    r = infra("plan", str(path), "--local", "--detailed-exitcode", state=state)
    assert r.returncode == 2 and "# smoke.ddp will run (cluster changed, never ran since)" in r.stdout, r.stdout
    r = infra("apply", str(path), "--local", "--auto-approve", "--no-smoke", state=state)
    assert r.returncode == 0 and "Smoke jobs not run (--no-smoke): smoke.ddp" in r.stdout, r.stdout + r.stderr


def test_changed_resources_say_which_input_changed_and_render_never_says_no_changes():
    from infra_cli.plan.model import CREATE, DELETE, NO_OP, REPLACE, UPDATE, Plan, ResourceChange
    from infra_cli.commands.views.plan import render_plan
    from infra_cli.plan.smoke_pending import changed_smokes

    deps = {"smoke.a": ("cluster.gpu", "environment.img"), "smoke.b": ("cluster.cpu", "environment.img")}
    changes = [ResourceChange("cluster.gpu", "cluster", "gpu", UPDATE, {}, {}),
               ResourceChange("environment.img", "environment", "img", NO_OP, {}, {}),
               ResourceChange("cluster.cpu", "cluster", "cpu", DELETE, {}, None)]
    assert changed_smokes(changes, deps) == {}, "an update in place keeps the nodes the smoke proved"
    changes[0] = ResourceChange("cluster.gpu", "cluster", "gpu", REPLACE, {}, {})
    assert changed_smokes(changes, deps) == {"smoke.a": "cluster changed"}
    changes[1] = ResourceChange("environment.img", "environment", "img", CREATE, None, {"version": "2"})
    assert changed_smokes(changes, deps) == {"smoke.a": "cluster changed and environment changed",
                                             "smoke.b": "environment changed"}

    only_smoke = Plan("demo", "normal", [], ["smoke.a"], [], "x", smoke_reasons={"smoke.a": f"{LAST_FAILED}: job j"})
    text = render_plan(only_smoke)
    assert "No changes. Your infrastructure matches the stack." not in text
    assert "# smoke.a will run (last smoke failed: job j)" in text and "Plan: 1 smoke job to run" in text
    assert only_smoke.to_json()["smoke_reasons"] == {"smoke.a": "last smoke failed: job j"}
    clean = Plan("demo", "normal", [], [], [], "x")
    assert "No changes. Your infrastructure matches the stack." in render_plan(clean)


def test_a_secret_in_the_distribution_reaches_the_record_only_through_scrypt(tmp_path):
    """The inputs hash is a tag on Azure: an interpolated value (a token in environment_variables) must not be
    guessable from it with a fast hash, yet a changed token still makes the smoke pending."""
    import hashlib

    from infra_cli.plan.desired import desired_resources
    from infra_cli.plan.model import canonical_json
    from infra_cli.plan.smoke_pending import _distribution_settings, smoke_inputs
    from infra_cli.stack.load import load_stack

    root = Path(__file__).resolve().parents[1]
    text = (root / "stacks" / "ib-a100.yaml").read_text()
    assert "environment_variables:" not in text.split("distributions:")[1]
    stack = tmp_path / "s.yaml"
    distributions, outputs = text.split("\noutputs:")   # the variables go under the distribution, before the outputs
    stack.write_text(distributions + "\n    environment_variables: {HF_TOKEN: '${HF_TOKEN}', PLAIN: x}\noutputs:" + outputs)

    def inputs(token: str):
        os.environ["HF_TOKEN"] = token
        try:
            loaded = load_stack(stack)
        finally:
            del os.environ["HF_TOKEN"]
        (name,) = loaded.stack.distributions
        return loaded, name, smoke_inputs(loaded, desired_resources(loaded), lambda _: None)[name]

    loaded, name, first = inputs("1234")
    settings = _distribution_settings(loaded, name)
    assert "1234" not in canonical_json(settings) and settings["environment_variables"]["PLAIN"] == "x"
    assert settings["environment_variables"]["HF_TOKEN"] == "(sensitive value)" and settings["sensitive_digest"]
    # what a fast hash of the plain settings would have given: not what is stored
    plain = loaded.stack.distributions[name].model_dump(mode="json")
    assert hashlib.sha256(canonical_json(plain).encode()).hexdigest()[:16] != first.distribution
    assert inputs("1235")[2].distribution != first.distribution
    assert inputs("1234")[2].distribution == first.distribution
