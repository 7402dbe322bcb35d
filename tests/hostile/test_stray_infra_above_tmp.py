"""A user who ran `infra apply --local` in /tmp has a /tmp/.infra: every test stack under /tmp would be part of that
project and share its cloud. The suite's temporary files go elsewhere then (tests/conftest.py), so the README's test
command still passes on that machine (it failed 10 tests of these two files before)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_suite_passes_with_an_infra_folder_above_its_temporary_directory(tmp_path):
    stray = tmp_path / "tmp"
    (stray / ".infra" / "local").mkdir(parents=True)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "tests/test_local_project.py", "tests/hostile/test_render_inputs.py", "-k",
                        "nearest_folder or one_cloud or suggested_out"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TMPDIR": str(stray)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
