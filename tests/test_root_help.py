"""`infra --help` answered from commands/root_help.py: the same text typer draws, never a stale one, and typer's
own drawing where the terminal is narrower than the text was drawn for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infra_cli.commands import root_help

ROOT = Path(__file__).resolve().parent.parent


def _help(columns: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": columns}
    return subprocess.run([sys.executable, "-m", "infra_cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=60)


def test_the_text_is_typers_drawing_of_the_current_sources():
    assert root_help.sources_crc() == root_help.SOURCES_CRC, \
        "commands/ changed: draw the text again with `python -m infra_cli.commands.root_help`"
    assert root_help.drawn() == root_help.TEXT


def test_help_prints_the_text_and_a_narrow_terminal_gets_typers_wrapping():
    wide, narrow = _help("120"), _help("60")
    assert (wide.returncode, wide.stdout, wide.stderr) == (0, root_help.TEXT, "")
    assert narrow.returncode == 0 and narrow.stdout != root_help.TEXT
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60 < max(len(line) for line in wide.stdout.splitlines())


def test_a_changed_source_falls_back_to_typer(monkeypatch, capsys):
    monkeypatch.setattr(root_help, "SOURCES_CRC", root_help.SOURCES_CRC ^ 1)
    assert not root_help.answered(["--help"])
    monkeypatch.undo()
    monkeypatch.setenv("COLUMNS", "100")
    assert not root_help.answered(["--help", "plan"]) and not root_help.answered(["plan", "--help"])
    assert root_help.answered(["--help"]) and capsys.readouterr().out == root_help.TEXT
