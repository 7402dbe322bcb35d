"""`infra emulator serve` prints a Python script that reaches it with the SDKs: the script is run, as printed,
against the served emulator (its snippet raised NameError before: `time` was not imported)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from infra_cli.commands.emulator import PYTHON_SCRIPT_HEADER

ROOT = Path(__file__).resolve().parent.parent


def test_the_banners_python_script_runs_against_the_served_emulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "REQUESTS_CA_BUNDLE")}
    server = subprocess.Popen([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(tmp_path / "state")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = []
        for line in server.stdout:
            banner.append(line)
            if line.startswith("Ctrl-C stops it"):
                break
        text = "".join(banner)
        assert PYTHON_SCRIPT_HEADER in text, text + server.stderr.read() if server.poll() is not None else text
        lines = text.split(PYTHON_SCRIPT_HEADER + "\n", 1)[1].splitlines()
        script = textwrap.dedent("\n".join(lines[:next(i for i, ln in enumerate(lines) if not ln.startswith("    "))]))
        (tmp_path / "banner.py").write_text(script)
        run = subprocess.run([sys.executable, str(tmp_path / "banner.py")], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, script + "\n" + run.stderr[-3000:]
        workspace, computes, sizes = run.stdout.strip().split(" ", 2)
        assert workspace == "mlw-demo" and computes == "[]" and sizes.endswith("sizes in eastus"), run.stdout
        assert int(sizes.split()[0]) > 10, run.stdout
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
