"""Hostile sizes and pasted blocks: each gets a located diagnostic and the documented exit code, never a
traceback (found while building size_name.py and the paste support: a Kelvin-sign K and Arabic-Indic digits
matched a case-insensitive \\d/[a-z] pattern, a 5000-digit vCPU count overflowed int(), a trailing newline
slipped past `$`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.knowledge.size_name import parse_size_name

ROOT = Path(__file__).resolve().parent.parent.parent
HEADER = """\
stack: hostile
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-hostile, location: eastus}
"""
DIST = HEADER + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  env: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  job:
    cluster: gpu
    environment: env
"""


def _validate(tmp_path: Path, text: str) -> tuple[int, list[dict], str]:
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(path)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)["diagnostics"] if r.stdout.strip() else [], r.stderr


@pytest.mark.parametrize("size", [
    "Standard_\u212a96asr_v4",            # Kelvin sign, which [a-z] matches under re.IGNORECASE without re.ASCII
    "Standard_ND\u0669\u0666asr_v4",      # Arabic-Indic digits, which \d matches
    "Standard_ND" + "9" * 5000 + "r",    # more digits than int() converts
    "Standard_ND96asr_v4\\n",             # a newline `$` would have let through (YAML "...\n")
    "Standard_ND96asr__v4",
    " Standard_ND96asr_v4",
])
def test_size_names_outside_the_convention(tmp_path, size):
    assert parse_size_name(size.replace("\\n", "\n")) is None
    rc, found, _ = _validate(tmp_path, HEADER + f'clusters:\n  gpu:\n    size: "{size}"\n')
    assert rc == 1
    assert [(d["rule"], d["severity"], d["line"]) for d in found] == [("cluster.size-unknown", "error", 5)]


@pytest.mark.parametrize("extra, line", [
    ("    distribution: [pytorch]\n", 11),                     # a list where the block goes
    ("    distribution: pytorch\n", 11),
    ("    distribution: {type: 7}\n", 11),
    ("    distribution: {type: pytorch}\n    resources: {instance_count: true}\n", 12),
    ("    distribution: {type: pytorch, distribution: {type: mpi}}\n", 11),   # a block inside the block
    ("    type: mpi\n    distribution: {type: PYTORCH}\n", 12),               # disagreeing, in any case
    ("    type: null\n    distribution: {type: pytorch}\n", 12),
])
def test_pasted_blocks_gone_wrong(tmp_path, extra, line):
    rc, found, stderr = _validate(tmp_path, DIST + extra)
    assert rc == 1, stderr
    # the rest of the stack is judged in the same pass (a warning about it may come with the errors)
    found = [d for d in found if d["severity"] == "error"]
    assert found and all(d["hint"] for d in found), found
    # the block's own line; a block that is no mapping also leaves the distribution without a type (its key)
    assert line in {d["line"] for d in found} and {d["line"] for d in found} <= {line, 8}, found


@pytest.mark.parametrize("field", ['$schema: 5', 'name: 123', 'tier: 5', 'type: [amlcompute]', 'name: ""'])
def test_pasted_compute_fields_gone_wrong(tmp_path, field):
    rc, found, _ = _validate(tmp_path, HEADER + f"clusters:\n  gpu:\n    size: Standard_ND96asr_v4\n    {field}\n")
    assert rc == 1
    assert [(d["rule"], d["line"]) for d in found] == [("stack.invalid", 6)]
