"""The `infra` program ends without the interpreter's teardown (commands/main.py run()): nothing may be lost
by it. Exit codes, output written to a pipe or a file, exit handlers and threads still running are
all as a normal exit leaves them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "stacks").glob("*.yaml"))


def _infra(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, capture_output=True, timeout=120,
                          **kwargs)


def test_output_to_a_pipe_is_complete_and_the_exit_code_kept():
    ok = _infra("validate", "--json", *STACKS)
    assert ok.returncode == 0 and json.loads(ok.stdout) is not None, ok.stderr[-500:]
    schema = _infra("schema")   # the longest output of an offline command, block-buffered into the pipe
    assert schema.returncode == 0 and json.loads(schema.stdout)["properties"]


def test_an_error_exit_code_is_kept(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("stack: x\nworkspace: 3\n")
    done = _infra("validate", "--json", str(bad))
    assert done.returncode == 1 and json.loads(done.stdout)["diagnostics"][0]["severity"] == "error"
    assert _infra("no-such-command").returncode == 1          # usage errors exit 1 (Terraform's code)


def test_output_to_a_file_is_complete(tmp_path):
    out = tmp_path / "schema.json"
    with out.open("wb") as fh:
        done = subprocess.run([sys.executable, "-m", "infra_cli", "schema"], cwd=ROOT, stdout=fh,
                              stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0 and json.loads(out.read_text())["properties"]


def test_exit_handlers_run_and_running_threads_finish(tmp_path):
    marker = tmp_path / "thread-done"
    code = ("import atexit, sys, threading, time\n"
            "atexit.register(lambda: print('exit handler ran', flush=True))\n"
            f"def late(): time.sleep(0.3); open({str(marker)!r}, 'w').write('done')\n"
            "threading.Thread(target=late).start()\n"
            "sys.argv = ['infra', '--version']\n"
            "from infra_cli.commands.main import run\n"
            "run()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "infra v" in done.stdout and "exit handler ran" in done.stdout, done
    assert marker.read_text() == "done"   # the thread was joined, as at a normal exit
    alone = subprocess.run([sys.executable, "-c", code.replace("threading.Thread(target=late).start()\n", "")],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and alone.stdout.index("infra v") < alone.stdout.index("exit handler ran")

