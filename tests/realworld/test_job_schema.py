"""validators/job_schema.yaml is azure-ai-ml's own command job schema (bench/job_schema.py writes it), and the
stack's distribution reads every key of it: the data cannot drift from the installed azure-ai-ml, nor the model
from the data."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from infra_cli.knowledge.job_schema import job_schema
from infra_cli.stack.model import (JOB_KEYS_ELSEWHERE, NESTED_DISTRIBUTION_KEYS, Distribution, JobDistribution,
                                   JobLimits, JobQueueSettings, JobResources)

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
    types = {"pytorch", "mpi", "tensorflow"}
    assert types <= set(schema.distribution)
    assert _keys(JobDistribution) == set().union(*(schema.distribution[t] for t in types))
    assert set(NESTED_DISTRIBUTION_KEYS["resources"]) <= set(schema.resources)


def test_validate_reads_the_data_not_azure_ai_ml(tmp_path):
    """The offline loader takes the file as data (a user's INFRA_VALIDATORS_DIR copy included)."""
    schema = job_schema()
    assert schema.azure_ai_ml and schema.source.startswith("https://")
    assert "shm_size" in schema.resources and "docker_args" in schema.resources
