"""Hostile command-line values, read without pydantic (infra_cli/commands/params.py): each is refused as
typer refuses it (a usage error, exit 1), never an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, message", [
    # Python reads no int of more than 4300 digits: int() raised ValueError, reported as a bug in infra
    (["apply", "--parallelism", "9" * 5000, "stacks/ib-a100.yaml"], "exceeded maximum size"),
    (["apply", "--parallelism", "-" + "9" * 30, "stacks/ib-a100.yaml"], "greater than or equal to 1"),
    (["image", "check", "--timeout", "nan", "localhost:1/x"], "greater than or equal to 0.001"),
    (["emulator", "serve", "--port", "1" + "0" * 20], "less than or equal to 65535"),
])
def test_an_odd_number_is_a_usage_error(args, message):
    done = subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and message in done.stderr, done.stderr[-1000:]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
