"""The local Azure's serverless compute, through azure-ai-ml as users submit to it: a command job with no compute,
or with compute="serverless" (azure-ai-ml sends it as is), runs on nodes made for it, of resources.instance_type
in queue_settings' tier; a job naming a compute that does not exist is still refused."""

from __future__ import annotations

import pytest
from azure.ai.ml import PyTorchDistribution, command
from azure.ai.ml.entities import Environment, QueueSettings

from test_emulator_jobs import ALL_REDUCE, IMAGE, _code, _download, _stream

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def runtime(clients):
    clients.ml.environments.create_or_update(Environment(name="runtime", version="1", image=IMAGE))
    return clients


@pytest.mark.parametrize("compute", [None, "serverless"])
def test_a_job_without_compute_runs_on_serverless_compute(runtime, tmp_path, compute):
    job = command(code=str(_code(tmp_path, "train.py", ALL_REDUCE)), command="python train.py",
                  environment="runtime:1", compute=compute, instance_count=2, instance_type="Standard_ND96asr_v4",
                  distribution=PyTorchDistribution(process_count_per_instance=1))
    job.queue_settings = QueueSettings(job_tier="standard")
    submitted = runtime.ml.jobs.create_or_update(job)
    assert "rank 0 of 2: all_reduce sum 3.0" in _stream(runtime, submitted.name)
    got = runtime.ml.jobs.get(submitted.name)
    assert got.status == "Completed" and got.resources.instance_type == "Standard_ND96asr_v4"
    assert (_download(runtime, submitted.name, tmp_path) / "outputs" / "rank_1.json").exists()


def test_a_job_naming_a_compute_that_does_not_exist_is_still_refused(runtime, tmp_path):
    job = command(code=str(_code(tmp_path, "train.py", ALL_REDUCE)), command="python train.py",
                  environment="runtime:1", compute="nowhere", instance_count=1)
    with pytest.raises(Exception) as exc:
        runtime.ml.jobs.create_or_update(job)
    assert "nowhere" in str(exc.value)
