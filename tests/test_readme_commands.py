"""The README's command table lists every command and every option `--help` shows (issue 16): a user reads
the table, not the code, and an option missing from it does not exist for them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def help_text(*command: str) -> str:
    done = subprocess.run([sys.executable, "-m", "infra_cli", *command, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def subcommands(*group: str) -> list[str]:
    text = help_text(*group).split("Commands:", 1)
    return re.findall(r"^  ([a-z][\w-]*)\s", text[1], re.M) if len(text) == 2 else []


def all_commands() -> list[tuple[str, ...]]:
    out = []
    for name in subcommands():
        inner = subcommands(name)
        out += [(name, sub) for sub in inner] if inner else [(name,)]
    return out


def readme_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    return [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `infra")]


def options(*command: str) -> list[list[str]]:
    """Each option's spellings, e.g. ["--auto-approve", "-auto-approve"], --help left out."""
    text = help_text(*command).split("Options:", 1)[1]
    found = []
    for line in text.splitlines():
        m = re.match(r"^\s{2}(-{1,2}[\w-]+(?:, -{1,2}[\w-]+)*)", line)
        if m and "--help" not in m.group(1):
            found.append([o.strip() for o in m.group(1).split(",")])
    return found


def readme_commands() -> list[tuple[str, ...]]:
    """The commands the README's table has rows for: its words before the first argument or option."""
    found = []
    for row in readme_rows():
        words = tuple(re.match(r"\| `infra ((?:[a-z][\w-]* ?)*)", row).group(1).split())
        if words and words not in found:
            found.append(words)
    return found


# Read from the README at collection (every xdist worker collects): `--help` runs in the tests, once.
COMMANDS = readme_commands()


def test_the_readme_has_a_row_for_each_command_help_shows_and_no_other():
    """Each command `infra --help` shows (and its groups' `--help`) has a row, and each row's command exists;
    the parse works: a broken regex must not make the tests below pass on nothing."""
    shown = all_commands()
    assert {("plan",), ("apply",), ("image", "check"), ("state", "list"), ("emulator", "serve")} <= set(shown)
    assert sorted(COMMANDS) == sorted(shown), f"the README's rows: {COMMANDS}; --help shows: {shown}"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_readme_lists_the_command_and_its_options(command):
    rows = [r for r in readme_rows() if r.startswith(f"| `infra {' '.join(command)} ") or
            r.startswith(f"| `infra {' '.join(command)}`")]
    assert rows, f"README.md's command table has no row for `infra {' '.join(command)}`"
    cells = " ".join(rows)
    missing = [spellings[0] for spellings in options(*command)
               if not any(re.search(rf"{re.escape(s)}(?![\w-])", cells) for s in spellings)]
    assert not missing, f"README.md's row for `infra {' '.join(command)}` does not show {missing}"


def test_the_quick_start_makes_the_virtual_environment_it_installs_into():
    # issue 34 walk: the quick start began at `pip install`, into whatever Python was first on PATH (Debian's
    # refuses: externally-managed-environment); its venv is one git ignores, in the clone it names
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [line[4:] for line in text.splitlines() if line.startswith("    ")]
    venv = re.fullmatch(r"python3 -m venv (\S+) && \. (\S+)/bin/activate", lines[0])
    assert venv and venv.group(1) == venv.group(2), lines[0]
    assert lines[1].startswith("pip install -r requirements.lock")
    ignored = subprocess.run(["git", "check-ignore", "-q", venv.group(1) + "/"], cwd=ROOT, timeout=30)
    assert ignored.returncode == 0, f"{venv.group(1)}/ is not in .gitignore"
