import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_example_stacks_validate_clean():
    stacks = sorted(str(p) for p in (ROOT / "stacks").glob("*.yaml"))
    assert len(stacks) >= 5
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", *stacks], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr.replace("0 error(s)", "")
