"""Output that cannot be written: a reader that stops early, a full disk. The program says so once and
never exits 0 (an incomplete plan JSON must not pass a CI step), with no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_a_reader_that_stops_early_gets_no_traceback():
    # as `infra skus --json | head -c 0`: the reading end is closed before the first write
    for args in (["skus", "--json"], ["--version"], ["schema"]):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, stdout=write_end,
                                  stderr=subprocess.PIPE, text=True, timeout=60,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})
        finally:
            os.close(write_end)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr[-1500:])


def test_a_full_disk_is_an_error_not_a_traceback_nor_success():
    # --version prints from an option's callback, while the command line is read: outside any command,
    # where an OSError was a traceback. Output that cannot be written must never exit 0.
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    for args in (["--version"], ["validate", "--json", "stacks/ib-a100.yaml"], ["schema"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, stdout=full,
                                  stderr=subprocess.PIPE, text=True, timeout=60,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr[-1500:])
        assert "No space left on device" in done.stderr

