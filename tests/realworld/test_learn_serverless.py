"""Microsoft Learn's serverless command jobs (tests/realworld/learn/, sources in its README.md), pasted into a stack
as a distribution without `cluster:`, get Azure's verdict: the "all fields" job (one Standard_E4s_v3 node, the
Standard tier, a user identity) is valid and renders to a file azure-ai-ml loads with no compute; the job on 4
Standard_NC24 nodes names a size Azure retired on 2023-09-06 (the NC-series retirement, validators/skus.yaml), which
serverless compute no longer creates: refused at its instance_type."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_stack
from realworld_paste import pasted_stack

LEARN = Path(__file__).parent / "learn"
# file -> (Azure accepts it today, infra's errors)
VERDICTS = {"serverless-all-fields.yml": (True, []), "serverless-nc24.yml": (False, ["cluster.size-retired"])}


def _stack(tmp_path: Path, fixture: str) -> Path:
    text = (LEARN / fixture).read_text(encoding="utf-8")
    environment = yaml.safe_dump(yaml.safe_load(text)["environment"], sort_keys=False)
    path = tmp_path / "stack.yaml"
    path.write_text(pasted_stack(text, cluster=None, size="", environment=environment), encoding="utf-8")
    return path


def test_every_file_has_a_verdict_and_a_source():
    readme = (LEARN / "README.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in LEARN.glob("*.yml")) == sorted(VERDICTS)
    for name in VERDICTS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert len(row.split("`")[-2]) == 40


@pytest.mark.parametrize("fixture", sorted(VERDICTS))
def test_infras_verdict_is_azures(tmp_path, fixture):
    valid, expected = VERDICTS[fixture]
    try:
        found = validate_stack(load_stack(_stack(tmp_path, fixture)))
    except DiagnosticError as exc:
        found = exc.diagnostics
    errors = [d for d in found if d.severity == "error"]
    assert sorted({d.rule for d in errors}) == expected, errors
    assert all(d.line and d.hint for d in errors)
    if not valid:
        assert "instance_type" in (tmp_path / "stack.yaml").read_text().splitlines()[errors[0].line - 1]


def test_the_valid_one_renders_to_a_serverless_job_azure_ai_ml_loads(tmp_path):
    pytest.importorskip("azure.ai.ml")
    from azure.ai.ml import load_job

    path = _stack(tmp_path, "serverless-all-fields.yml")
    written, _ = render_stack(path, tmp_path / "out")
    job_file = tmp_path / "out" / "jobs" / "job" / "train-job.yml"
    assert job_file in written
    job = load_job(job_file)
    assert job.compute is None and job.resources.instance_type == "Standard_E4s_v3"
    assert job.queue_settings.job_tier.lower() == "standard" and job.identity is not None
