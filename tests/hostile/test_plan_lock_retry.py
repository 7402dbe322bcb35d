"""Hostile runs against plan, the stack lock and the retry policy: failed resources, racing processes,
transient errors, throttling and failed long-running operations (issue: hardening pass, items 3, 4, 5, 12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from emulator_fixtures import (TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE,  # noqa: E402
                               WORKSPACE_YAML, start_emulator)

from infra_cli.azure.clients import DEFAULT_RETRY_TOTAL  # noqa: E402
from infra_cli.azure.provider import AzureProvider  # noqa: E402
from infra_cli.state.lock import LockHeld, StackLock  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# Each worker runs what `infra apply --local` runs: its own in-process emulator over the shared state
# directory, real SDK clients, the real StackLock. A byte on the shared pipe releases both at once. A busy
# thread in each worker stands for a loaded machine: the interpreter switches threads every few milliseconds,
# anywhere in a request handler, as a busy CPU preempts a process.
_LOCK_WORKER = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    from infra_cli.azure.provider import AzureProvider
    from infra_cli.state.lock import LockHeld, StackLock
    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    state, gate, trials = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    ws = Workspace(subscription_id=sys.argv[4], resource_group="rg-race", name="mlw-race", location="eastus")
    clients = build_clients(ws, local=True, local_dir=state)
    StackLock(AzureProvider(clients), "warm-up-" + str(os.getpid()), "apply").acquire()   # imports and connections made
    threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
    print("ready", flush=True)
    for trial in range(trials):
        os.read(gate, 1)
        try:
            StackLock(AzureProvider(clients), f"race{trial}", "apply").acquire()
            print(trial, "won", flush=True)
        except LockHeld:
            print(trial, "refused", flush=True)
""")


def _child_env(state: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL")}
    env.update(INFRA_LOCAL_DIR=str(state), PYTHONPATH=str(ROOT))
    return env


def test_two_local_processes_never_both_take_the_lock(tmp_path):
    """Before: the version create was check-then-insert under a per-process lock, and two `--local` processes
    on one state directory both took the lock in about half of the trials."""
    trials = 20
    state = tmp_path / "state"
    gate_read, gate_write = os.pipe()
    workers = []
    try:
        for _ in range(2):
            proc = subprocess.Popen(
                [sys.executable, "-c", _LOCK_WORKER, str(state), str(gate_read), str(trials), TEST_SUBSCRIPTION],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(gate_read,),
                env=_child_env(state), cwd=tmp_path)
            workers.append(proc)
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        outcomes: dict[int, list[str]] = {}
        for trial in range(trials):
            os.write(gate_write, b"xx")          # both workers wake on the same write
            for proc in workers:
                line = proc.stdout.readline().split()
                assert line and int(line[0]) == trial, proc.stderr.read()
                outcomes.setdefault(trial, []).append(line[1])
        both = [t for t, o in outcomes.items() if o.count("won") != 1]
        assert both == [], f"trials where the lock was not taken exactly once: {both} ({outcomes})"
    finally:
        os.close(gate_write)
        os.close(gate_read)
        for proc in workers:
            proc.wait(timeout=60)


def test_transient_error_taking_the_lock_is_reported_as_such(tmp_path):
    """Before: a 500 on the lock's version create read as 'locked by None since None (None)'."""
    from azure.core.exceptions import HttpResponseError

    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    server = start_emulator(tmp_path / "flaky", error_rate=0.4, seed=11)
    try:
        ws = Workspace(subscription_id=TEST_SUBSCRIPTION, resource_group=TEST_RESOURCE_GROUP, name=TEST_WORKSPACE,
                       location=TEST_LOCATION)
        server.ensure_workspace(ws.subscription_id, ws.resource_group, ws.name, ws.location)
        clients = build_clients(ws, local=True, emulator=server, retry_total=0)   # every 500 reaches the caller
        failed_writes = 0
        for attempt in range(40):
            server.stats.reset()
            try:
                StackLock(AzureProvider(clients), f"flaky{attempt}", "apply").acquire()
            except LockHeld as exc:
                pytest.fail(f"nobody holds lock flaky{attempt}, yet: {exc}")
            except HttpResponseError as exc:
                assert exc.status_code == 500 and "None" not in str(exc)
                failed_writes += any(r.method == "PUT" and r.status == 500 for r in server.stats.records)
        assert failed_writes >= 2  # the case in question happened, and read as what it was
    finally:
        server.stop()


# ---- a failed or stuck cluster is not converged (item 3) ----------------------------------------------------

STACK = f"""
stack: hostile
{WORKSPACE_YAML}clusters:
  a100:
    size: Standard_ND96asr_v4
    max_instances: 2
  nc0:
    size: Standard_NC24ads_A100_v4
    max_instances: 1
  nc1:
    size: Standard_NC24ads_A100_v4
    max_instances: 1
"""


def _stack(tmp_path: Path) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(STACK)
    return path


def _clients(path: Path, server):
    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.load import load_stack

    return build_clients(load_stack(path).stack.workspace, local=True, emulator=server)


def _plan(path: Path, clients):
    from infra_cli.plan.engine import plan_stack
    from infra_cli.stack.load import load_stack

    from infra_cli.azure.provider import AzureProvider

    return plan_stack(load_stack(path), AzureProvider(clients))


def _apply_once(path: Path, server, *, retry_pause_s: float):
    """Plan and execute once, as apply does; (clients, result, events)."""
    from infra_cli.apply.executor import execute
    from infra_cli.azure.provider import AzureProvider

    clients = _clients(path, server)
    outcome = _plan(path, clients)
    events: list = []
    result = execute(outcome.plan, outcome.loaded, AzureProvider(clients), emit=events.append, retry_pause_s=retry_pause_s)
    return clients, result, events


def test_failed_cluster_plans_as_replacement_with_the_reason(tmp_path):
    """Before: provisioningState was ignored, so a cluster whose create failed planned as 'No changes'."""
    from azure.ai.ml.entities import AmlCompute
    from azure.core.exceptions import HttpResponseError

    from infra_cli.apply.engine import apply_outcome
    from infra_cli.commands.views.plan import render_plan

    path, state = _stack(tmp_path), tmp_path / "state"
    server = start_emulator(state, lro_failure_rate=1.0)
    try:
        clients = _clients(path, server)
        with pytest.raises(HttpResponseError) as failed:   # as an apply's create that failed would leave it
            clients.ml.compute.begin_create_or_update(AmlCompute(
                name="a100", size="Standard_ND96asr_v4", max_instances=2,
                tags={"infra.stack": "hostile", "infra.address": "cluster.a100"})).result()
        assert failed.value.error.code == "InternalServerError"
        assert str(clients.ml.compute.get("a100").provisioning_state.value) == "Failed"
    finally:
        server.stop()
    server = start_emulator(state)   # the same cloud, no more faults
    try:
        clients = _clients(path, server)
        outcome = _plan(path, clients)
        change = {c.address: c for c in outcome.plan.resource_changes}["cluster.a100"]
        assert change.actions == ["delete", "create"]
        assert change.action_reason.startswith("replace_because_tainted: provisioningState is Failed")
        assert "InternalServerError" in change.action_reason
        assert change.replace_paths[0] == ["provisioning_state"]
        text = render_plan(outcome.plan)
        assert "cluster.a100 is tainted, so must be replaced" in text and "provisioningState is Failed" in text
        assert "provisioning_state" in json.dumps(outcome.plan.to_json())
        result = apply_outcome(outcome)
        assert result.ok, result.failures
        assert _plan(path, clients).plan.changes == []
        assert str(clients.ml.compute.get("a100").provisioning_state.value) == "Succeeded"
    finally:
        server.stop()


def test_cluster_stuck_creating_past_the_bound_plans_as_replacement(tmp_path):
    """A create that never ends (here: one that takes a day) is a replacement once past the bound, and not before."""
    from azure.ai.ml.entities import AmlCompute

    from infra_cli.azure.provider import AzureProvider
    from infra_cli.plan.desired import desired_resources
    from infra_cli.plan.diff import diff
    from infra_cli.plan.live import refresh
    from infra_cli.knowledge.update_semantics import provisioning_rules
    from infra_cli.stack.load import load_stack

    path = _stack(tmp_path)
    server = start_emulator(tmp_path / "state", provisioning_delay_s=86400)
    try:
        clients = _clients(path, server)
        clients.ml.compute.begin_create_or_update(AmlCompute(
            name="nc0", size="Standard_NC24ads_A100_v4", max_instances=1,
            tags={"infra.stack": "hostile", "infra.address": "cluster.nc0"}))   # not waited for
        loaded = load_stack(path)
        desired = desired_resources(loaded)
        live = refresh(AzureProvider(clients), desired)
        assert live.of("cluster")["nc0"].attributes["provisioning_state"] == "Creating"
        bound = provisioning_rules().stuck_after_s["Creating"]

        def nc0(now):
            changes = diff(desired, live, stack="hostile", source=loaded.source, now=now).changes
            return {c.address: c for c in changes}["cluster.nc0"]

        assert nc0(time.time()).actions == ["no-op"]
        stuck = nc0(time.time() + bound + 60)
        assert stuck.actions == ["delete", "create"] and "taken as stuck" in stuck.action_reason
    finally:
        server.stop()


# ---- retries: counts, Retry-After, failed operations (item 5) ------------------------------------------------

def test_retry_policy_retries_status_errors_as_often_as_asked(tmp_path):
    """Before: RetryPolicy(retry_total=10) left retry_status at azure-core's 3, so a 4th 429/500 in a row failed."""
    from infra_cli.azure.clients import retry_policy

    policy = retry_policy(10, "local")
    settings = policy.configure_retries({})
    assert (settings["total"], settings["status"], settings["connect"], settings["read"]) == (10, 10, 10, 10)
    assert settings["timeout"] < 604800   # the whole request with its retries is bounded

    # and through the SDK: 70% of requests throttled or failing, every read still answered
    server = start_emulator(tmp_path / "state", throttle_rate=0.4, error_rate=0.3, seed=5, retry_after_s=0)
    try:
        clients = _clients(_stack(tmp_path), server)
        for _ in range(15):
            assert list(clients.ml.compute.list()) == []
        statuses = server.stats.by_status()
        assert statuses.get(429) and statuses.get(500)
    finally:
        server.stop()


def test_retry_after_is_honoured_and_capped(tmp_path):
    from azure.core.pipeline import PipelineResponse
    from azure.core.rest import HttpRequest

    from infra_cli.azure.clients import _RETRY_AFTER_MAX_S, retry_policy

    class Answer:  # the slice of an HTTP response that Retry-After is read from
        def __init__(self, value):
            self.headers = {"Retry-After": value}

    policy = retry_policy(10, "local")
    request = HttpRequest("GET", "https://127.0.0.1/")
    assert policy.get_retry_after(PipelineResponse(request, Answer("2"), None)) == 2
    assert policy.get_retry_after(PipelineResponse(request, Answer("3600"), None)) == _RETRY_AFTER_MAX_S["local"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_apply_converges_through_failed_operations(tmp_path, seed):
    """30% of requests throttled, 10% failing, 20% of long-running operations failing (bench/bench_faults.py
    runs 20 of these with Retry-After honoured): one apply still creates all three clusters (failed creates
    deleted and made again), and the next plan is empty. Before: 6 of 10 first applies failed."""
    path = _stack(tmp_path)
    server = start_emulator(tmp_path / "state", throttle_rate=0.3, error_rate=0.1, lro_failure_rate=0.2, seed=seed,
                            retry_after_s=0)
    try:
        clients, result, events = _apply_once(path, server, retry_pause_s=0.05)
        assert result.ok, result.failures
        assert result.added == 3
        assert server.stats.by_status().get(429) and server.stats.by_status().get(500)   # the faults did hit it
        assert _plan(path, clients).plan.changes == []
    finally:
        server.stop()


def test_failed_operation_reports_code_and_message_after_bounded_attempts(tmp_path):
    from infra_cli.knowledge.update_semantics import transient_errors

    path = _stack(tmp_path)
    server = start_emulator(tmp_path / "state", lro_failure_rate=1.0)
    try:
        _, result, events = _apply_once(path, server, retry_pause_s=0)
        assert not result.ok and len(result.failures) == 3
        for failure in result.failures:
            assert failure.code == "InternalServerError"
            assert "failed (injected by the emulator" in failure.message
        retries = [e for e in events if e.address == "cluster.nc0" and "trying again" in e.text]
        assert len(retries) == transient_errors().max_attempts - 1
    finally:
        server.stop()


# ---- faults and a served emulator through the CLI, as users drive them ---------------------------------------

CLI_STACK = STACK.replace("  nc0:\n    size: Standard_NC24ads_A100_v4\n    max_instances: 1\n", "")


def _cli(args: list[str], state: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, timeout=300,
                          env={**_child_env(state), **env}, cwd=state.parent)


def test_cli_local_reads_fault_settings_from_the_environment(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(CLI_STACK)
    state = tmp_path / "state"
    r = _cli(["plan", str(path), "--local"], state, INFRA_EMULATOR_THROTTLE_RATE="lots")
    assert r.returncode == 1 and "INFRA_EMULATOR_THROTTLE_RATE" in r.stderr and "Traceback" not in r.stderr
    # every request throttled: the plan gives up after its retries and says why
    r = _cli(["plan", str(path), "--local"], state, INFRA_EMULATOR_THROTTLE_RATE="1")
    assert r.returncode == 1 and "TooManyRequests" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    # how many tries, counted where they are answered (not timed): an emulator this test reads, every request
    # throttled with Retry-After: 1; the first request is sent once and retried DEFAULT_RETRY_TOTAL times
    served = tmp_path / "served"
    server = start_emulator(served, throttle_rate=1.0)
    try:
        r = _cli(["plan", str(path), "--local"], served, INFRA_EMULATOR_URL=server.url)
        assert r.returncode == 1 and "TooManyRequests" in r.stdout + r.stderr, r.stdout + r.stderr
        assert server.stats.by_status() == {429: 1 + DEFAULT_RETRY_TOTAL}, server.stats.records
        assert f"hint: infra sent the request {1 + DEFAULT_RETRY_TOTAL} times, waiting between tries as Azure's " \
               "Retry-After asked" in r.stderr, r.stderr
    finally:
        server.stop()


def test_cli_local_uses_a_running_emulator_at_infra_emulator_url(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(CLI_STACK)
    state = tmp_path / "served"
    serve = subprocess.Popen([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(state),
                              "--provisioning-delay", "0.2", "--lro-failure-rate", "0.3", "--seed", "4"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(state))
    try:
        first = serve.stdout.readline()
        url = next(word for word in first.split() if word.startswith("https://"))
        elsewhere = tmp_path / "elsewhere"   # the served emulator's dir holds the cert and token; state is there
        r = _cli(["apply", str(path), "--local", "--auto-approve", "--no-smoke"], state, INFRA_EMULATOR_URL=url)
        assert r.returncode == 0, r.stdout + r.stderr
        r = _cli(["plan", str(path), "--local", "--detailed-exitcode"], state, INFRA_EMULATOR_URL=url)
        assert r.returncode == 0 and "No changes." in r.stdout, r.stdout + r.stderr
        r = _cli(["plan", str(path), "--local"], elsewhere, INFRA_EMULATOR_URL=url)
        assert r.returncode == 1 and "token" in r.stderr and "Traceback" not in r.stderr
        r = _cli(["plan", str(path), "--local"], state, INFRA_EMULATOR_URL="https://example.com:443/")
        assert r.returncode == 1 and "INFRA_EMULATOR_URL" in r.stderr
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    # with the server gone, --local does not quietly start an emulator of its own, and says at once that nothing
    # answers there (it said "Azure refused: ServiceRequestError" after about 50 s of the SDKs' retries)
    r = _cli(["plan", str(path), "--local"], state, INFRA_EMULATOR_URL=url)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert f"nothing answers at INFRA_EMULATOR_URL='{url}'" in r.stderr and "infra emulator serve" in r.stderr
    assert "Azure refused" not in r.stderr
