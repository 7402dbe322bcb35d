"""`infra apply` on a real terminal (a pseudo-terminal): the approval prompt and the live progress table.

Off a terminal apply reads the answer from standard input as Terraform does (tested in test_lifecycle_local.py);
these run the CLI with its stdin, stdout and stderr on a pty, as a user at a shell would, against the local
emulator. `infra smoke` on a terminal draws the busbw sweep as a bar chart.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "stacks" / "ib-a100.yaml"
# ib-a100 with one node of a 2-GPU size: the terminal's drawing is the same for 2 ranks as for 16, and the 16-rank
# smoke of ib-a100 itself runs once a suite, in tests/test_shipped_stacks.py.
SMALL = (STACK.read_text().replace("size: Standard_ND96asr_v4", "size: Standard_NC80adis_H100_v5")
         .replace("infiniband: required", "infiniband: optional").replace("instance_count: 2", "instance_count: 1")
         .replace("process_count_per_instance: 8", "process_count_per_instance: 2"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A CLI process on a pseudo-terminal: read what it shows, type into it."""

    def __init__(self, *args: str, state: Path):
        self.master, slave = pty.openpty()
        env = {**os.environ, "INFRA_LOCAL_DIR": str(state), "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
        self.proc = subprocess.Popen([sys.executable, "-m", "infra_cli", *args], stdin=slave, stdout=slave,
                                     stderr=slave, cwd=ROOT, env=env, close_fds=True)
        os.close(slave)
        self.raw = b""

    def read_until(self, needle: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never appeared; the terminal shows:\n{self.text[-3000:]}")
            if not self._read(0.5) and self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode} before {needle!r}:\n{self.text[-3000:]}")
        return self.text

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self, timeout: float = 180) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1):  # what is left in the pty
            pass
        os.close(self.master)
        return self.proc.wait(timeout=5)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", errors="replace")).replace("\r", "")

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed its side
            return False
        self.raw += chunk
        return bool(chunk)


def test_apply_asks_on_a_terminal_and_shows_live_progress(tmp_path):
    small = tmp_path / "ib-a100-small.yaml"
    small.write_text(SMALL)
    assert SMALL.count("NC80adis") == 1 and "instance_count: 1" in SMALL and "process_count_per_instance: 2" in SMALL
    t = Terminal("apply", str(small), "--local", "--no-smoke", state=tmp_path / "state")
    t.read_until("Enter a value:")
    assert "+ resource \"cluster\" \"a100\"" in t.text and "Only 'yes' will be accepted to approve." in t.text
    assert "\x1b[" in t.raw.decode(errors="replace"), "a terminal gets colour"
    t.type("yes\n")
    code = t.finish()
    out = t.text
    assert code == 0, out[-3000:]
    # rich's live table: a tick, the address and what happened, with the time it took.
    assert re.search(r"✓\s+cluster\.a100\s+created\s+\d+\.\d+s", out), out[-3000:]
    assert "Apply complete! Resources: 1 added, 0 changed, 0 destroyed." in out
    assert "Traceback" not in out

    plan = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(small), "--local", "--detailed-exitcode"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")})
    # the cluster matches; the smoke --no-smoke skipped is still to run (pending, with why), so exit 2
    assert plan.returncode == 2 and "No changes to resources" in plan.stdout, plan.stdout
    assert "# smoke.ddp will run (cluster changed, never ran since)" in plan.stdout

    smoke = Terminal("smoke", str(small), "--local", state=tmp_path / "state")
    code = smoke.finish(timeout=600)
    out = smoke.text
    assert code == 0, out[-3000:]
    assert "smoke.ddp: all_reduce busbw by message size" in out
    bars = re.findall(r"^\s+\d+(?:\.\d)? [KMG]?i?B (█*)\s*\S* ?\d+\.\d{3} GB/s$", out, re.M)
    assert len(bars) >= 2 and max(len(b) for b in bars) > 0, out[-3000:]


def test_anything_but_yes_cancels_and_changes_nothing(tmp_path):
    for keys in ("no\n", "\x04"):  # an answer, and Ctrl-D (end of input) at the prompt
        t = Terminal("apply", str(STACK), "--local", "--no-smoke", state=tmp_path / "state")
        t.read_until("Enter a value:")
        t.type(keys)
        code = t.finish()
        assert code == 1 and "Apply cancelled." in t.text, t.text[-2000:]
        assert "Traceback" not in t.text and "refused" not in t.text
    plan = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(STACK), "--local", "--detailed-exitcode"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")})
    assert plan.returncode == 2 and "Plan: 1 to add, 0 to change, 0 to destroy." in plan.stdout


def _validate_on_a_terminal(tmp_path: Path, **env: str) -> bytes:
    """`infra validate` of a stack with an error, its output on a pty: what a user at a shell sees, escapes kept."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace("size: Standard_NC80adis_H100_v5", "size: Standard_NOPE_v9"))
    master, slave = pty.openpty()
    environment = {**{k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}, **env}
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "validate", str(bad)], stdin=slave, stdout=slave,
                            stderr=slave, cwd=ROOT, env=environment, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        try:
            chunk = os.read(master, 65536) if ready else b""
        except OSError:
            chunk = b""
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=30) == 1, out
    assert b"error" in out, out
    return out


def test_no_color_and_a_dumb_terminal_get_no_escape_codes(tmp_path):
    """https://no-color.org: NO_COLOR set to anything turns colour off, as TERM=dumb does; a terminal that
    wants colour still gets it."""
    assert b"\x1b[31m" in _validate_on_a_terminal(tmp_path, TERM="xterm-256color")
    assert b"\x1b[" not in _validate_on_a_terminal(tmp_path, TERM="xterm-256color", NO_COLOR="1")
    assert b"\x1b[" not in _validate_on_a_terminal(tmp_path, TERM="dumb")
