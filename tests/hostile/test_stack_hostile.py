"""Hostile stack files and hostile failures (issue: hardening pass, items 9 and 12): deep nesting, alias
bombs of large strings, FIFOs and oversized files, local errors that must not read as Azure's, and a
`smoke --local` killed with SIGKILL that must not leave its job processes running."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra_cli.commands.errors import report_error
from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.stack.bounded_yaml import MAX_DEPTH, MAX_STACK_BYTES
from infra_cli.stack.source import MAX_EXPANDED_BYTES

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ("workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
             "name: mlw, location: eastus}\n")


def infra(*args: str, cwd: Path | None = None, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """The real CLI in a child process, with a memory ceiling so a bomb fails the test instead of the machine."""
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    environ = {k: v for k, v in os.environ.items() if k != "INFRA_DEBUG"}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=environ, preexec_fn=limit_memory)


def rules_of(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r.stderr


# ---- item 9: nesting, alias bombs ------------------------------------------------------------------------

@pytest.mark.parametrize("levels", [1_000, 50_000])
def test_deep_nesting_is_a_diagnostic_not_a_crash(tmp_path, levels):
    # ~1,000 levels was a RecursionError traceback, ~50,000 a segfault of the C composer
    stack = tmp_path / "deep.yaml"
    stack.write_text("stack: deep\n" + WORKSPACE + "clusters: " + "[" * levels + "]" * levels + "\n")
    r = infra("validate", str(stack))
    assert r.returncode == 1, r.stderr[-2000:]
    err = rules_of(r)
    assert f"{stack}:3:" in err and "error[stack.too-deep]" in err and f"more than {MAX_DEPTH} levels" in err
    assert "hint:" in err


def test_nesting_within_the_bound_is_read(tmp_path):
    stack = tmp_path / "ok.yaml"
    depth = MAX_DEPTH - 3
    stack.write_text("stack: ok\n" + WORKSPACE + "clusters: {}\nx: " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(stack)
    assert [d.rule for d in exc.value.diagnostics] == ["stack.unknown-key"]  # read whole, then judged


def test_aliases_to_one_large_string_are_bounded_in_bytes(tmp_path):
    # 900 KB once, repeated 1,000 times by aliases: 900 MB printed before; the node-count guard saw 1,002 nodes
    stack = tmp_path / "bomb.yaml"
    stack.write_text("stack: bomb\n" + WORKSPACE + f"big: &a \"{'x' * 900_000}\"\n"
                     "distributions: {d: {command: [" + ", ".join(["*a"] * 1000) + "]}}\n")
    assert stack.stat().st_size < MAX_STACK_BYTES
    r = infra("validate", str(stack))
    assert r.returncode == 1
    err = rules_of(r)
    assert "error[stack.too-large]" in err and f"{MAX_EXPANDED_BYTES >> 20} MiB" in err
    assert len(r.stdout) + len(r.stderr) < 10_000  # the value is never echoed back


# ---- item 12: FIFOs, devices, oversized files --------------------------------------------------------------

@pytest.mark.parametrize("command", [["validate"], ["render", "--out", "OUT"], ["plan"], ["apply", "--auto-approve"]],
                         ids=lambda c: c[0])
def test_a_fifo_as_a_stack_is_refused_without_reading(tmp_path, command):
    fifo = tmp_path / "stack.yaml"
    os.mkfifo(fifo)  # opening it for reading blocks until a writer comes: that was a hang
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    r = infra(args[0], str(fifo), *args[1:], timeout=30, INFRA_LOCAL_DIR=str(tmp_path / "local"))
    assert r.returncode == 1
    err = rules_of(r)
    assert "error[stack.unreadable]" in err and "FIFO" in err


def test_a_device_or_directory_as_a_stack_is_refused(tmp_path):
    for path in ("/dev/zero", str(tmp_path)):  # /dev/zero never ends: a child process, with a memory ceiling
        r = infra("validate", path, timeout=30)
        assert r.returncode == 1, path
        assert "error[stack.unreadable]" in rules_of(r), path


def test_an_oversized_stack_is_refused_before_parsing(tmp_path):
    stack = tmp_path / "big.yaml"
    with open(stack, "w") as fh:
        fh.write("stack: big\n" + WORKSPACE)
        fh.write("# " + "y" * (MAX_STACK_BYTES + 10) + "\n")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(stack)
    (d,) = exc.value.diagnostics
    assert d.rule == "stack.too-large" and d.file == str(stack) and d.hint


# ---- item 9: local errors read as what they are; bugs as bugs ---------------------------------------------

def test_a_local_os_error_is_not_reported_as_azure_refusing(tmp_path):
    r = infra("plan", str(ROOT / "stacks" / "ib-a100.yaml"), "--local", cwd=tmp_path,
              INFRA_LOCAL_DIR="/dev/null/state")  # a state dir that cannot exist
    assert r.returncode == 1
    err = rules_of(r)
    assert "Azure refused" not in err
    assert "NotADirectoryError" in err and "/dev/null/state" in err
    assert len(err.strip().splitlines()) <= 2


def test_infra_debug_shows_the_traceback(tmp_path):
    r = infra("plan", str(ROOT / "stacks" / "ib-a100.yaml"), "--local", cwd=tmp_path,
              INFRA_LOCAL_DIR="/dev/null/state", INFRA_DEBUG="1")
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr and "NotADirectoryError" in r.stderr


def test_report_error_names_a_bug_as_a_bug_and_azure_as_azure(capsys, monkeypatch):
    monkeypatch.delenv("INFRA_DEBUG", raising=False)
    assert report_error(KeyError("slot")) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (a bug in infra): KeyError") and "INFRA_DEBUG=1" in err
    assert "Azure refused" not in err and "Traceback" not in err

    assert report_error(RecursionError("maximum recursion depth exceeded")) == 1
    err = capsys.readouterr().err
    assert "RecursionError" in err and "Azure refused" not in err

    assert report_error(PermissionError(13, "Permission denied", "/root/x")) == 1
    assert capsys.readouterr().err.strip() == "error: PermissionError: Permission denied: /root/x"

    from azure.core.exceptions import HttpResponseError

    assert report_error(HttpResponseError(message="(QuotaExceeded) not enough cores")) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Azure refused:") and "not enough cores" in err


def test_there_is_one_azure_refused_wrapper():
    sources = [p for p in (ROOT / "infra_cli").rglob("*.py") if "Azure refused" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(ROOT).as_posix() for p in sources] == ["infra_cli/commands/errors.py"]


# ---- item 12: kill -9 of `infra smoke --local` ----------------------------------------------------------------

def _job_processes(marker: str) -> list[int]:
    """Live processes the emulator started as job processes of this test: they inherit the test's marker
    variable and carry the AZUREML_RUN_ID the runner sets (the CLI and the reaper have no run id)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or a zombie
        if marker.encode() in environ and any(v.startswith(b"AZUREML_RUN_ID=") for v in environ):
            out.append(int(entry.name))
    return out


def test_kill_9_of_smoke_local_leaves_no_job_process(tmp_path):
    state = tmp_path / "state"
    stack = ROOT / "stacks" / "ib-a100.yaml"  # 2 nodes x 8 processes: 16 ranks and their launchers
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", timeout=300,
                    INFRA_LOCAL_DIR=str(state))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    marker = f"INFRA_HOSTILE_KILL9={os.getpid()}-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items() if k != "INFRA_DEBUG"}
    env.update(PYTHONPATH=str(ROOT), INFRA_LOCAL_DIR=str(state), INFRA_HOSTILE_KILL9=marker.split("=", 1)[1])
    cli = subprocess.Popen([sys.executable, "-m", "infra_cli", "smoke", str(stack), "--local"], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while len(_job_processes(marker)) < 2 and time.monotonic() < deadline and cli.poll() is None:
            time.sleep(0.2)
        running = _job_processes(marker)
        assert running, "the smoke job never started its processes"
        cli.send_signal(signal.SIGKILL)  # no handler, no atexit, no finally runs in the CLI
        cli.wait(timeout=30)
        deadline = time.monotonic() + 15
        while _job_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _job_processes(marker)
        assert not left, f"{len(left)} job process(es) of the killed CLI still run (of {len(running)} seen before)"
    finally:
        if cli.poll() is None:
            cli.kill()
        for pid in _job_processes(marker):  # leave nothing behind even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_long_wrong_value_is_not_echoed_whole(tmp_path):
    stack = tmp_path / "long.yaml"
    stack.write_text("stack: \"" + "x" * 900_000 + "\"\n" + WORKSPACE)
    r = infra("validate", str(stack))
    assert r.returncode == 1 and "error[stack.invalid]" in rules_of(r)
    assert len(r.stdout) + len(r.stderr) < 2_000


def test_a_number_too_long_to_read_is_not_echoed_whole(tmp_path):
    # Python reads no int of more than 4300 digits: the YAML reader's own error echoed all of them.
    stack = tmp_path / "digits.yaml"
    stack.write_text("stack: d\n" + WORKSPACE + "clusters:\n  c: {max_instances: " + "9" * 50_000 + "}\n")
    r = infra("validate", str(stack))
    assert r.returncode == 1 and "error[stack.syntax]" in rules_of(r) and "(50002 characters)" in r.stderr
    assert len(r.stdout) + len(r.stderr) < 2_000


def test_hostile_values_in_every_kind_of_field_are_diagnostics(tmp_path):
    # The stack model's own reader (infra_cli/stack/fields.py): odd types and sizes anywhere are diagnostics
    # with a place, never a crash, and the process ends in time.
    odd = ["[]", "{}", "null", "true", "-1", "1e400", "-.inf", ".nan", "'   '", "2024-01-02", "0x10", "1_0",
           "'" + "y" * 10_000 + "'"]
    fields = ["size", "tier", "min_instances", "max_instances", "idle_time_before_scale_down", "tags",
              "enable_node_public_ip", "identity", "ssh_settings", "lifecycle", "name", "$schema"]
    body = "".join(f"  c{i}_{j}: {{{field}: {value}}}\n" for i, field in enumerate(fields) for j, value in enumerate(odd))
    stack = tmp_path / "odd.yaml"
    stack.write_text("stack: odd\n" + WORKSPACE + "clusters:\n" + body)
    r = infra("validate", "--json", str(stack))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    import json
    found = json.loads(r.stdout)["diagnostics"]
    assert found and all(d["line"] and d["file"] for d in found)
    schema = {"stack.invalid", "stack.syntax", "stack.unknown-key", "stack.missing-key"}
    # the schema's errors, and in the same pass what the rules find in the entries the schema accepted
    # (these clusters' names hold '_', which Azure refuses)
    assert {"stack.invalid", "cluster.name"} <= {d["rule"] for d in found}
    assert all(d["rule"] in schema or d["rule"].startswith("cluster.") for d in found), found


def test_environment_variable_names_no_job_could_set_are_refused(tmp_path):
    """An empty name, or one holding '=', cannot be put in a process's environment (POSIX): it validated clean
    and the job failed on Azure (here the emulator's runner failed it with a ValueError)."""
    stack = tmp_path / "env.yaml"
    stack.write_text("stack: env\n" + WORKSPACE +
                     "clusters: {a100: {size: Standard_ND96asr_v4, max_instances: 2}}\n"
                     "environments: {acpt: {curated: 'azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest'}}\n"
                     "distributions:\n  d:\n    cluster: a100\n    environment: acpt\n    type: pytorch\n"
                     "    process_count_per_instance: 8\n    environment_variables:\n"
                     "      '': x\n      'X=1': y\n      NCCL_DEBUG: INFO\n      lower.dotted-name: z\n")
    r = infra("validate", "--json", str(stack))
    import json
    found = json.loads(r.stdout)["diagnostics"]
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert [(d["rule"], d["line"], d["column"]) for d in found] == [
        ("distribution.environment-variable-name", 12, 7), ("distribution.environment-variable-name", 13, 7)], found
    assert "'='" in found[0]["hint"] and found[0]["hint"].endswith("V1_chap08.html)")
