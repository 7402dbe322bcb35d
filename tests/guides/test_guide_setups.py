"""Every setup the distributed-training guides show, as a stack, with the verdict the guides intend.

Each stack in tests/guides/stacks/ names its guide and lists its expected diagnostics as `# expect: SEVERITY RULE`
lines (`# expect: clean` for none). The test runs `infra validate` (the real CLI, --json) and compares the
multiset of (severity, rule); every diagnostic must point at a line and column of that stack and carry a hint.
Where the guides disagree (the DeepSpeed launcher), the newest guide wins and the stack says which one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

STACKS = Path(__file__).resolve().parent / "stacks"
ROOT = STACKS.parent.parent.parent
_EXPECT = re.compile(r"^# expect: (?:(error|warning|info) (\S+)|clean)\s*$", re.MULTILINE)


def expected(stack: Path) -> Counter:
    found = _EXPECT.findall(stack.read_text(encoding="utf-8"))
    assert found, f"{stack.name} states no `# expect:` verdict"
    return Counter((severity, rule) for severity, rule in found if rule)


@pytest.mark.parametrize("stack", sorted(STACKS.glob("*.yaml")), ids=lambda p: p.stem)
def test_guide_setup_gets_the_intended_verdict(stack):
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(stack)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    diagnostics = json.loads(run.stdout)["diagnostics"]
    got = Counter((d["severity"], d["rule"]) for d in diagnostics)
    assert got == expected(stack), json.dumps(diagnostics, indent=1)
    assert run.returncode == (1 if any(s == "error" for s, _ in got) else 0)
    lines = stack.read_text(encoding="utf-8").count("\n")
    for d in diagnostics:
        assert d["file"] == str(stack) and 1 <= d["line"] <= lines and d["column"] >= 1 and d["hint"], d


def test_the_guides_setups_are_all_here():
    """The setups issue 11 names: a stack for each, so none silently drops out."""
    names = {p.stem for p in STACKS.glob("*.yaml")}
    for needed in ("pytorch_per_process", "pytorch_per_node_launch", "deepspeed_launcher_multi_node",
                   "deepspeed_under_mpi", "horovod_mpi", "lightning_multi_node", "transformers_per_node",
                   "transformers_per_process", "tensorflow_parameter_server", "tensorflow_multiworker",
                   "mpi_per_node_launch", "infiniband_nc24r", "infiniband_nc24rs_v3", "infiniband_nc24s_v3"):
        assert needed in names
