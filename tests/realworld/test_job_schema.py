"""validators/job_schema.yaml is azure-ai-ml's own command job schema (bench/job_schema.py writes it), and the
stack's distribution reads every key of it: the data cannot drift from the installed azure-ai-ml, nor the model
from the data."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.knowledge.job_schema import job_schema
from infra_cli.stack.distribution import (JOB_KEYS_ELSEWHERE, NESTED_DISTRIBUTION_KEYS, TYPE_KEYS, Distribution,
                                          JobDistribution, JobLimits, JobQueueSettings, JobResources)

ROOT = Path(__file__).resolve().parents[2]


def test_data_file_is_the_installed_azure_ai_mls_schema():
    pytest.importorskip("azure.ai.ml")
    generator = runpy.run_path(str(ROOT / "bench" / "job_schema.py"))
    want = generator["text"](generator["generate"]())
    assert (ROOT / "validators" / "job_schema.yaml").read_text(encoding="utf-8") == want, (
        "validators/job_schema.yaml differs from the installed azure-ai-ml's schema: run python bench/job_schema.py")


def _keys(model) -> set[str]:
    return {f.key for f in model.model_fields.values()}


def test_every_command_job_key_has_a_place_in_a_stack():
    schema = job_schema()
    placed = _keys(Distribution) | set(JOB_KEYS_ELSEWHERE)
    assert set(schema.command_job) - placed == set()
    assert set(JOB_KEYS_ELSEWHERE) <= set(schema.command_job)  # no excuse for a key Azure does not have


def test_nested_blocks_read_exactly_azures_keys():
    schema = job_schema()
    assert _keys(JobResources) == set(schema.resources)
    assert _keys(JobLimits) == set(schema.limits)
    assert _keys(JobQueueSettings) == set(schema.queue_settings)
    types = {"pytorch", "mpi", "tensorflow", "ray"}
    assert types == set(schema.distribution)   # every type azure-ai-ml knows is one a stack takes
    assert _keys(JobDistribution) == set().union(*(schema.distribution[t] for t in types))
    assert {t: {"type", *keys} for t, keys in TYPE_KEYS.items()} == {t: set(schema.distribution[t]) for t in types}
    assert set(NESTED_DISTRIBUTION_KEYS["resources"]) <= set(schema.resources)


def _validators_copy(tmp_path: Path, edit) -> Path:
    """A copy of validators/ whose job_schema.yaml is `edit(data)`, as a user's INFRA_VALIDATORS_DIR."""
    copy = tmp_path / "validators"
    shutil.copytree(ROOT / "validators", copy)
    data = yaml.safe_load((copy / "job_schema.yaml").read_text(encoding="utf-8"))
    edit(data)
    (copy / "job_schema.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return copy


def _validate(tmp_path: Path, validators: Path | None) -> subprocess.CompletedProcess:
    """`infra validate` of a stack whose service has a key `future_key`, with -X importtime (what it imported)."""
    stack = tmp_path / "stack.yaml"
    distributions, outputs = (ROOT / "stacks" / "ib-a100.yaml").read_text(encoding="utf-8").split("\noutputs:")
    stack.write_text(distributions + "\n    services: {vscode: {type: vs_code, nodes: all, future_key: 1}}\noutputs:"
                     + outputs, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "INFRA_VALIDATORS_DIR"}
    if validators is not None:
        env["INFRA_VALIDATORS_DIR"] = str(validators)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "infra_cli", "validate", str(stack)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_validate_reads_the_data_not_azure_ai_ml(tmp_path):
    """The offline loader takes the file as data: a user's INFRA_VALIDATORS_DIR copy that knows one more service
    key (as a newer azure-ai-ml would) changes what validate says, and azure.ai.ml is never imported."""
    packaged = _validate(tmp_path, None)
    assert packaged.returncode == 1 and "error[distribution.job-key]" in packaged.stderr, packaged.stderr
    assert "'future_key'" in packaged.stderr
    copy = _validators_copy(tmp_path, lambda data: data["services"].append("future_key"))
    extended = _validate(tmp_path, copy)
    assert extended.returncode == 0, extended.stderr
    assert "future_key" not in extended.stdout + extended.stderr.replace("import time:", "")
    for run in (packaged, extended):
        imported = _imported(run.stderr)
        assert "infra_cli.knowledge.job_schema" in imported       # the data was read...
        assert not {m for m in imported if m == "azure.ai.ml" or m.startswith("azure.ai.ml.")}   # ...not the SDK


def test_an_empty_key_in_a_users_job_schema_is_a_diagnostic(tmp_path):
    """An empty key name in INFRA_VALIDATORS_DIR's job_schema.yaml: knowledge.invalid at the block, never taken
    as a key (nor a traceback)."""
    copy = _validators_copy(tmp_path, lambda data: data["services"].append(""))
    r = _validate(tmp_path, copy)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error[knowledge.invalid]" in r.stderr and "job_schema.yaml" in r.stderr, r.stderr
    assert "services must be a list of key names" in r.stderr and "INFRA_VALIDATORS_DIR" in r.stderr
