"""Usage and option lines as Terraform users read them: `infra plan [OPTIONS] STACK`, `--target ADDR`,
not typer's `{STACK}` and `<list[str]>` (issue 16)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["validate", "schema", "skus", "graph", "render", "plan", "apply", "destroy", "import", "force-unlock",
            "show", "state list", "smoke", "image check", "emulator serve"]


def help_text(command: str) -> str:
    done = subprocess.run([sys.executable, "-m", "infra_cli", *command.split(), "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_usage_line_names_arguments_plainly(command):
    text = help_text(command)
    usage = next(line for line in text.splitlines() if line.startswith("Usage:"))
    assert usage.startswith(f"Usage: infra {command} [OPTIONS]"), usage
    assert "{" not in usage and "}" not in usage, usage


@pytest.mark.parametrize("command", COMMANDS)
def test_options_that_take_a_value_name_it(command):
    text = help_text(command)
    options = text.split("Options:", 1)[-1]
    typed = re.findall(r"^\s+(--[\w-]+(?:, -[\w-]+)?) (<[^>]+>)", options, re.M)
    assert not typed, f"`infra {command} --help` shows option values as types, not names: {typed}"


def test_usage_lines_read_as_written():
    assert "Usage: infra plan [OPTIONS] STACK\n" in help_text("plan")
    assert "Usage: infra validate [OPTIONS] STACK...\n" in help_text("validate")
    assert "Usage: infra import [OPTIONS] ADDR AZURE_NAME STACK\n" in help_text("import")
    assert re.search(r"--target ADDR\s", help_text("plan"))
