"""plan / apply / destroy / import against the local emulator, through the real Azure SDK clients."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, WORKSPACE_YAML, start_emulator

from infra_cli.apply.engine import apply_outcome, import_resource
from infra_cli.state.lock import LockHeld, StackLock
from infra_cli.diagnostics import DiagnosticError
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.plan.planfile import read_plan_file, write_plan_file
from infra_cli.stack.load import load_stack
from infra_cli.state.store import StateStore

ROOT = Path(__file__).resolve().parent.parent

STACK = f"""
stack: life
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_ND96asr_v4
    max_instances: 2
    idle_time_before_scale_down: 900
    infiniband: required
  gpu2:
    size: Standard_ND96amsr_A100_v4
    max_instances: 1
environments:
  train:
    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
    requires: [openmpi>=4.1]
distributions:
  ddp: {{cluster: gpu, environment: train, type: pytorch, instance_count: 2, process_count_per_instance: 8}}
"""


def write_stack(tmp_path: Path, text: str = STACK, conda: str = "dependencies: [python=3.10]\n") -> Path:
    (tmp_path / "conda.yaml").write_text(conda)
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return path


def plan(path, clients, **kw):
    return plan_stack(load_stack(path), AzureProvider(clients), **kw)


def actions(outcome) -> dict[str, list[str]]:
    return {c.address: c.actions for c in outcome.plan.resource_changes}


def converge(path, clients):
    result = apply_outcome(plan(path, clients))
    assert result.ok, result.failures
    return result


def test_new_stack_plans_all_create_then_apply_then_empty(tmp_path, clients, emulator):
    path = write_stack(tmp_path)
    first = plan(path, clients)
    assert actions(first) == {"cluster.gpu": ["create"], "cluster.gpu2": ["create"], "environment.train": ["create"]}
    assert first.plan.smoke_jobs == ["smoke.ddp"]
    result = converge(path, clients)
    assert (result.added, result.changed, result.destroyed) == (3, 0, 0)
    again = plan(path, clients)
    assert not again.plan.changes, again.plan.changes
    # a second apply is a no-op that makes no write request
    emulator.stats.reset()
    outcome = plan(path, clients)
    assert not outcome.plan.changes
    assert emulator.stats.writes == 0
    live = clients.ml.compute.get("gpu")
    assert live.tags["infra.stack"] == "life" and live.tags["infra.address"] == "cluster.gpu"


def test_scale_in_place_size_replaces(tmp_path, clients):
    path = write_stack(tmp_path)
    converge(path, clients)
    write_stack(tmp_path, STACK.replace("max_instances: 2", "max_instances: 3"))
    outcome = plan(path, clients)
    assert actions(outcome)["cluster.gpu"] == ["update"]
    converge(path, clients)
    assert clients.ml.compute.get("gpu").max_instances == 3

    write_stack(tmp_path, STACK.replace("max_instances: 2", "max_instances: 3")
                .replace("Standard_ND96asr_v4", "Standard_ND96isr_H100_v5"))
    outcome = plan(path, clients)
    (change,) = [c for c in outcome.plan.resource_changes if c.address == "cluster.gpu"]
    assert change.actions == ["delete", "create"] and change.replace_paths == [["size"]]
    converge(path, clients)
    assert clients.ml.compute.get("gpu").size.lower() == "standard_nd96isr_h100_v5"   # Azure answers it upper-cased
    assert not plan(path, clients).plan.changes


def test_removed_cluster_deleted_untagged_left_alone(tmp_path, clients):
    from azure.ai.ml.entities import AmlCompute

    path = write_stack(tmp_path)
    converge(path, clients)
    clients.ml.compute.begin_create_or_update(AmlCompute(name="someone-else", size="Standard_NC24ads_A100_v4",
                                                         max_instances=1)).result()
    text = STACK.replace("""  gpu2:
    size: Standard_ND96amsr_A100_v4
    max_instances: 1
""", "")
    write_stack(tmp_path, text)
    outcome = plan(path, clients)
    assert actions(outcome)["cluster.gpu2"] == ["delete"]
    assert "cluster.someone-else" not in actions(outcome)
    converge(path, clients)
    names = {c.name for c in clients.ml.compute.list()}
    assert "gpu2" not in names and "someone-else" in names


def test_untagged_same_name_is_an_error_and_import_adopts_it(tmp_path, clients):
    from azure.ai.ml.entities import AmlCompute

    path = write_stack(tmp_path)
    clients.ml.compute.begin_create_or_update(AmlCompute(
        name="gpu", size="Standard_ND96asr_v4", max_instances=2, idle_time_before_scale_down=900,
        enable_node_public_ip=True)).result()  # as the stack has it (no public IP would need a subnet)
    outcome = plan(path, clients)
    assert "plan.unmanaged-resource" in [d.rule for d in outcome.plan.diagnostics]
    assert "cluster.gpu" not in actions(outcome)
    store = StateStore(AzureProvider(clients))
    before = store.serial("life")
    holder = StackLock(AzureProvider(clients), "life", "apply")   # an apply of the stack is running
    holder.acquire()
    with pytest.raises(LockHeld):
        import_resource("cluster.gpu", "gpu", path, backend=lambda _: AzureProvider(clients))
    assert not (clients.ml.compute.get("gpu").tags or {}), "nothing written beside the running apply"
    holder.release()
    import_resource("cluster.gpu", "gpu", path, backend=lambda _: AzureProvider(clients))
    assert store.serial("life").serial == before.serial + 1   # plans made before the import are stale
    outcome = plan(path, clients)
    assert not outcome.plan.has_errors()
    assert actions(outcome)["cluster.gpu"] == ["no-op"]
    with pytest.raises(DiagnosticError) as again:   # Terraform's "Resource already managed"
        import_resource("cluster.gpu", "gpu", path, backend=lambda _: AzureProvider(clients))
    assert again.value.diagnostics[0].rule == "import.already-managed"


def test_refresh_only_shows_out_of_band_change(tmp_path, clients):
    path = write_stack(tmp_path)
    converge(path, clients)
    entity = clients.ml.compute.get("gpu")
    entity.max_instances = 3
    entity.network_settings = None  # azure-ai-ml cannot PUT back an entity it read without a subnet
    clients.ml.compute.begin_create_or_update(entity).result()  # someone scales it in the portal
    outcome = plan(path, clients, mode="refresh-only")
    (d,) = outcome.plan.drift
    assert d.address == "cluster.gpu" and d.before["max_instances"] == 2 and d.after["max_instances"] == 3
    assert outcome.plan.resource_changes == []


def test_conda_edit_registers_new_version_old_kept(tmp_path, clients):
    path = write_stack(tmp_path)
    converge(path, clients)
    write_stack(tmp_path, conda="dependencies: [python=3.11]\n")
    outcome = plan(path, clients)
    (change,) = [c for c in outcome.plan.resource_changes if c.address == "environment.train"]
    assert change.actions == ["create"] and change.after["version"] == "2"
    converge(path, clients)
    assert clients.ml.environments.get("train", version="1").version == "1"
    assert clients.ml.environments.get("train", label="latest").version == "2"
    assert not plan(path, clients).plan.changes


def test_restricted_size_and_short_quota_fail_the_plan(tmp_path, emulator, clients):
    text = STACK.replace(f"location: {TEST_LOCATION}", "location: westus2").replace(
        "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H200_v5")
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, "mlw-west", "westus2")
    path = write_stack(tmp_path, text.replace(TEST_WORKSPACE, "mlw-west"))
    from infra_cli.commands.backend import build_clients

    west = build_clients(load_stack(path).stack.workspace, local=True, emulator=emulator)
    outcome = plan(path, west)
    problems = {d.rule: d.message for d in outcome.plan.diagnostics}
    assert "preflight.size-restricted" in problems
    assert "Standard_ND96isr_H200_v5" in problems["preflight.size-restricted"]
    assert "westus2" in problems["preflight.size-restricted"]

    path = write_stack(tmp_path, STACK.replace("max_instances: 2", "max_instances: 20"))
    outcome = plan(path, clients)
    quota = [d for d in outcome.plan.diagnostics if d.rule == "preflight.quota"]
    assert quota, outcome.plan.diagnostics
    msg = quota[0].message
    assert "Standard_ND96asr_v4" in msg and "eastus" in msg and "1920" in msg and "available" in msg


def test_prevent_destroy_and_destroy(tmp_path, clients):
    from azure.ai.ml.entities import AmlCompute

    protected = STACK.replace("  gpu2:\n    size: Standard_ND96amsr_A100_v4\n    max_instances: 1\n",
                              "  gpu2:\n    size: Standard_ND96amsr_A100_v4\n    max_instances: 1\n"
                              "    lifecycle: {prevent_destroy: true}\n")
    path = write_stack(tmp_path, protected)
    converge(path, clients)
    clients.ml.compute.begin_create_or_update(AmlCompute(name="untagged", size="Standard_NC24ads_A100_v4",
                                                         max_instances=1)).result()
    outcome = plan(path, clients, mode="destroy")
    assert "plan.prevent-destroy" in [d.rule for d in outcome.plan.diagnostics]
    # lift the protection on gpu2 through an apply, then destroy: untagged stays
    path = write_stack(tmp_path)
    converge(path, clients)
    outcome = plan(path, clients, mode="destroy")
    assert not outcome.plan.has_errors()
    assert sorted(c.address for c in outcome.plan.changes) == ["cluster.gpu", "cluster.gpu2", "environment.train"]
    result = apply_outcome(outcome, operation="destroy")
    assert result.ok and result.destroyed == 2 and result.changed == 1   # the environment released, not deleted
    assert {c.name for c in clients.ml.compute.list()} == {"untagged"}
    # Azure ML keeps the version, archived and without the stack's tags: no stack owns it now
    assert [e.version for e in clients.ml.environments.list("train")] == []
    assert plan(path, clients, mode="destroy").plan.changes == []


def test_stale_plan_file_refused_and_nothing_changes(tmp_path, clients, emulator):
    from infra_cli.apply.engine import StalePlan

    path = write_stack(tmp_path)
    converge(path, clients)
    write_stack(tmp_path, STACK.replace("max_instances: 2", "max_instances: 3"))
    outcome = plan(path, clients)
    planfile = tmp_path / "tf.plan"
    write_plan_file(planfile, outcome.plan, outcome.loaded.path, [])
    assert (planfile.stat().st_mode & 0o777) == 0o600
    saved = read_plan_file(planfile, key=None)
    assert [c.actions for c in saved.plan.changes] == [["update"]]
    # the live state moves on before the plan is applied
    entity = clients.ml.compute.get("gpu2")
    entity.max_instances = 4
    entity.network_settings = None
    clients.ml.compute.begin_create_or_update(entity).result()
    emulator.stats.reset()
    with pytest.raises(StalePlan):
        apply_outcome(outcome)
    assert clients.ml.compute.get("gpu").max_instances == 2
    writes = [r for r in emulator.stats.records if r.method in ("PUT", "DELETE", "PATCH") and "/computes/" in r.path]
    assert writes == []


def test_two_concurrent_lock_takers_one_wins(tmp_path, clients):
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def take():
        lock = StackLock(AzureProvider(clients), "race", "apply")
        barrier.wait()
        try:
            lock.acquire()
            outcomes.append("won")
        except LockHeld as exc:
            outcomes.append(f"refused by {exc.info.holder}")

    threads = [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.split(" ")[0] for o in outcomes) == ["refused", "won"]


def test_apply_refuses_while_locked(tmp_path, clients):
    path = write_stack(tmp_path)
    holder = StackLock(AzureProvider(clients), "life", "apply")
    holder.acquire()
    with pytest.raises(LockHeld) as info:
        apply_outcome(plan(path, clients))
    assert info.value.info.holder and info.value.info.since
    assert [c.name for c in clients.ml.compute.list()] == []
    holder.release()
    converge(path, clients)


def test_unknown_target_is_an_error(tmp_path, clients):
    path = write_stack(tmp_path)
    with pytest.raises(DiagnosticError):
        plan(path, clients, targets=["cluster.nope"])
    outcome = plan(path, clients, targets=["cluster.gpu"])
    assert list(actions(outcome)) == ["cluster.gpu"]


def test_faults_converge_without_duplicates(tmp_path):
    """20% of requests answered 429/500 and 10% of long-running operations failing: repeated applies converge."""
    from infra_cli.commands.backend import build_clients

    server = start_emulator(tmp_path / "faulty", throttle_rate=0.1, error_rate=0.1, lro_failure_rate=0.1, seed=7,
                            retry_after_s=0)
    try:
        path = write_stack(tmp_path)
        clients = build_clients(load_stack(path).stack.workspace, local=True, emulator=server)
        runs = 0
        for runs in range(1, 9):
            try:
                outcome = plan(path, clients)
            except Exception:  # a plan's read can exhaust its retries too; the next run tries again
                continue
            if not outcome.plan.changes:
                break
            try:
                apply_outcome(outcome)
            except Exception:
                pass
        assert runs < 8
        names = sorted(c.name for c in clients.ml.compute.list())
        assert names == ["gpu", "gpu2"]
        # Azure answers a cluster's size upper-cased (Compute/get/AmlCompute.json: "STANDARD_NC6"), as the emulator does
        assert {c.name: c.size.lower() for c in clients.ml.compute.list()} == {
            "gpu": "standard_nd96asr_v4", "gpu2": "standard_nd96amsr_a100_v4"}
    finally:
        server.stop()


def _child_env(state: Path) -> dict:
    # MLClient in this test process set AZUREML_CURRENT_CLOUD to its emulator's cloud; a child must not inherit it
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env["INFRA_LOCAL_DIR"] = str(state)
    return env


def _cli(*args, env_dir: Path, **kw):
    env = _child_env(env_dir)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env, **kw)


def test_cli_plan_apply_plan_and_json_contract(tmp_path):
    path = write_stack(tmp_path)
    state = tmp_path / "state"
    r = _cli("plan", str(path), "--local", "--json", "--detailed-exitcode", env_dir=state)
    assert r.returncode == 2, r.stderr
    body = json.loads(r.stdout)
    assert set(body) >= {"format_version", "stack", "mode", "resource_changes", "smoke_jobs", "diagnostics",
                         "live_fingerprint"}
    change = body["resource_changes"][0]
    assert set(change) >= {"address", "type", "name", "change", "replace_paths", "action_reason"}
    r = _cli("apply", str(path), "--local", env_dir=state, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "--auto-approve" in r.stderr
    r = _cli("apply", str(path), "--local", "--auto-approve", "--no-smoke", env_dir=state)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." in r.stdout
    # the resources match; the smoke apply skipped is still to run, so the plan says so and exits 2
    r = _cli("plan", str(path), "--local", "--detailed-exitcode", env_dir=state)
    assert r.returncode == 2 and "No changes." not in r.stdout, r.stdout
    assert "No changes to resources" in r.stdout and "# smoke.ddp will run (" in r.stdout
    body = json.loads(_cli("plan", str(path), "--local", "--json", env_dir=state).stdout)
    assert all(c["change"]["actions"] == ["no-op"] for c in body["resource_changes"])
    assert body["smoke_jobs"] == ["smoke.ddp"] and body["smoke_reasons"]["smoke.ddp"]
    assert "Traceback" not in r.stderr


def test_sigkill_mid_apply_then_plan_shows_rest_and_apply_finishes(tmp_path):
    text = STACK.replace("clusters:\n", "clusters:\n" + "".join(
        f"  extra{i}:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n" for i in range(6)))
    path = write_stack(tmp_path, text)
    state = tmp_path / "state"
    env = _child_env(state)
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "apply", str(path), "--local", "--auto-approve",
                             "--no-smoke", "--parallelism", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if sum(": created [" in x or ": registered version" in x for x in seen) >= 2:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    r = _cli("plan", str(path), "--local", "--json", env_dir=state)
    assert r.returncode == 0, r.stderr
    left = [c["address"] for c in json.loads(r.stdout)["resource_changes"] if c["change"]["actions"] != ["no-op"]]
    assert 0 < len(left) < 9
    r = _cli("apply", str(path), "--local", "--auto-approve", "--no-smoke", env_dir=state)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _cli("plan", str(path), "--local", "--json", env_dir=state)
    assert r.returncode == 0, r.stdout + r.stderr
    body = json.loads(r.stdout)
    assert all(c["change"]["actions"] == ["no-op"] for c in body["resource_changes"])
    assert body["smoke_jobs"] == ["smoke.ddp"]  # skipped with --no-smoke: still to run


def test_failed_operation_reported_others_finish(tmp_path):
    """Every long-running operation fails: apply tries each cluster a bounded number of times, then reports it
    with its Azure error code and message, while the independent changes (the environment) still finish."""
    from infra_cli.apply.executor import execute
    from infra_cli.commands.backend import build_clients
    from infra_cli.azure.provider import AzureProvider

    server = start_emulator(tmp_path / "lro", lro_failure_rate=1.0, seed=3)
    try:
        text = STACK.replace("clusters:\n", "clusters:\n" + "".join(
            f"  extra{i}:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n" for i in range(2)))
        path = write_stack(tmp_path, text)
        clients = build_clients(load_stack(path).stack.workspace, local=True, emulator=server)
        events = []
        outcome = plan(path, clients)
        result = execute(outcome.plan, outcome.loaded, AzureProvider(clients), emit=events.append, retry_pause_s=0)
        assert result.failures and not result.ok
        assert all(f.code == "InternalServerError" and "failed" in f.message for f in result.failures)
        assert result.added == 1  # the environment went through
        failed = {f.address for f in result.failures}
        assert failed == {"cluster.gpu", "cluster.gpu2", "cluster.extra0", "cluster.extra1"}
        assert {e.address for e in events if e.phase == "failed"} == failed
    finally:
        server.stop()


def test_stop_requested_starts_nothing_new(tmp_path, clients):
    """What Ctrl-C does: running changes finish, nothing new starts, the rest is listed and the plan shows it."""
    from infra_cli.apply.executor import execute
    from infra_cli.azure.provider import AzureProvider

    text = STACK.replace("clusters:\n", "clusters:\n" + "".join(
        f"  extra{i}:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n" for i in range(4)))
    path = write_stack(tmp_path, text)
    outcome = plan(path, clients)
    stop = threading.Event()

    def on_event(event):
        if event.phase == "start":
            stop.set()  # as if Ctrl-C came right after the first change started

    result = execute(outcome.plan, outcome.loaded, AzureProvider(clients), parallelism=1, emit=on_event, stop=stop)
    assert result.interrupted and not result.ok
    assert result.added == 1 and len(result.not_started) == 6
    left = [c.address for c in plan(path, clients).plan.changes]
    assert sorted(left) == sorted(result.not_started)


def test_cli_sigint_stops_apply_nonzero(tmp_path):
    text = STACK.replace("clusters:\n", "clusters:\n" + "".join(
        f"  extra{i}:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n" for i in range(4)))
    path = write_stack(tmp_path, text)
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "apply", str(path), "--local", "--auto-approve",
                             "--no-smoke", "--parallelism", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=_child_env(state))
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if ": creating" in line:
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(seen) + proc.stdout.read()
    assert proc.wait(timeout=120) == 130, out   # Ctrl-C's exit, whatever it stopped
    assert "not started" in out and "Traceback" not in out
    # what was stopped and what it left, in words; no line of the run without an address ("-: ...")
    assert "\nInterrupted (Ctrl-C): starting nothing new; waiting for the " in out and "\n-:" not in out, out
    # every change is accounted for: added (it had started and finished) or not started
    added = int(re.search(r"Apply interrupted! Resources: (\d+) added", out).group(1))
    not_started = int(re.search(r"Interrupted \(Ctrl-C\): (\d+) change\(s\) not started \(listed below\); the "
                                r"changes already running were finished and the stack's lock released\. "
                                rf"`infra plan {re.escape(str(path))} --local` shows what remains\.", out).group(1))
    assert added + not_started == 7 and out.count("  not started: ") == not_started, out
    r = _cli("plan", str(path), "--local", "--detailed-exitcode", env_dir=state)
    assert r.returncode == 2  # what is left shows in the next plan


def test_cli_sigint_before_anything_was_submitted_says_so(tmp_path):
    """Ctrl-C while `infra smoke` still reads Azure (each request slowed): typer exited 130 without a word; now
    one line says what stopped and what it left, and the reads in flight are abandoned, not waited for (each
    request here takes ten minutes: waiting for one would pass communicate's bound)."""
    path = write_stack(tmp_path)
    env = {**_child_env(tmp_path / "state"), "INFRA_EMULATOR_LATENCY": "600"}
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "infra_cli", "smoke", str(path), "--local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # past the imports (their timing lines end once the command runs), then inside the first slow request
    for line in proc.stderr:
        if "infra_cli.commands.smoke" in line:
            break
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("after Ctrl-C, infra waited for a read in flight") from None
    err = "\n".join(line for line in err.splitlines() if not line.startswith("import time:"))
    assert proc.returncode == 130, out + err
    assert err.strip().endswith("Interrupted (Ctrl-C): infra stopped; nothing was changed."), err
    assert "Traceback" not in err


def test_cli_apply_saved_plan_file_and_refuse_it_when_stale(tmp_path):
    big = STACK.replace("clusters:\n", "clusters:\n" + "".join(
        f"  extra{i}:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n" for i in range(6)))
    path = write_stack(tmp_path, big)
    state = tmp_path / "state"
    planfile = tmp_path / "changes.plan"
    r = _cli("plan", str(path), "--local", "--out", str(planfile), env_dir=state)
    assert r.returncode == 0, r.stderr
    assert planfile.read_bytes().find(b'"kind"') > 4096  # a plan big enough that its kind is not up front
    r = _cli("apply", str(planfile), "--local", "--no-smoke", env_dir=state, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr  # a saved plan applies without asking
    assert "9 added" in r.stdout
    # a plan saved before a change, applied after it: refused, nothing changes
    write_stack(tmp_path, big.replace("max_instances: 2", "max_instances: 3"))
    r = _cli("plan", str(path), "--local", "--out", str(planfile), env_dir=state)
    assert r.returncode == 0, r.stderr
    write_stack(tmp_path, big.replace("max_instances: 2", "max_instances: 4"))
    r = _cli("apply", str(planfile), "--local", "--no-smoke", env_dir=state)
    assert r.returncode == 1 and "apply.stale-plan" in r.stderr and "Traceback" not in r.stderr
    # the hint is a command to copy: the stack and the plan file named, --local as this run was
    assert (f"hint: run `infra plan {path.resolve()} --out {planfile} --local` again and apply the new file "
            f"(`infra apply {planfile} --local`)") in r.stderr, r.stderr
    r = _cli("plan", str(path), "--local", "--json", env_dir=state)
    after = [c for c in json.loads(r.stdout)["resource_changes"] if c["address"] == "cluster.gpu"][0]
    assert after["change"]["before"]["max_instances"] == 2


def test_a_build_context_keeps_its_dockerfile_name_on_apply(tmp_path, clients):
    """build.dockerfile_path reaches Azure: the version registered names the context's own Dockerfile."""
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile.gpu").write_text("FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n")
    text = STACK.replace("""    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04
    conda_file: conda.yaml
""", """    build: {path: ctx, dockerfile_path: Dockerfile.gpu}
""")
    converge(write_stack(tmp_path, text), clients)
    version = clients.ml.environments.get("train", label="latest")
    assert version.build.dockerfile_path == "Dockerfile.gpu"


def test_approval_from_a_pipe_as_terraform_reads_it(tmp_path):
    """`echo yes | infra apply` approves; any other answer, or none, cancels with nothing changed; off a
    terminal each resource's state change is one line."""
    path = write_stack(tmp_path)
    state = tmp_path / "state"
    for answer, code, said in (("no\n", 1, "Apply cancelled."), ("", 1, "--auto-approve"), ("yes please\n", 1, "cancelled")):
        r = _cli("apply", str(path), "--local", "--no-smoke", env_dir=state, input=answer)
        assert r.returncode == code and said in r.stdout + r.stderr, (answer, r.stdout[-500:], r.stderr[-500:])
        assert "Apply complete" not in r.stdout and "cluster.gpu: " not in r.stdout
    r = _cli("apply", str(path), "--local", "--no-smoke", env_dir=state, input="yes\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Enter a value:" in r.stdout and "Apply complete!" in r.stdout
    lines = [line for line in r.stdout.splitlines() if line.startswith("cluster.gpu:")]
    assert len(lines) == len(set(lines)), lines
    r = _cli("destroy", str(path), "--local", env_dir=state, input="nope\n")
    assert r.returncode == 1 and "Destroy cancelled." in r.stdout
    r = _cli("destroy", str(path), "--local", "-auto-approve", env_dir=state)
    assert r.returncode == 0 and "Destroy complete!" in r.stdout, r.stderr[-2000:]
