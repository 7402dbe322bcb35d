"""The emulator for a plain azure-ai-ml user: an MLClient built as `infra emulator serve` prints (no polling
interval of infra's) creates a cluster in about the provisioning time, not the SDK's 30 s default poll,
and jobs.stream shows the job's log lines."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from azure.ai.ml import command
from azure.ai.ml.entities import AmlCompute, Environment

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, start_emulator
from infra_cli.azure.credentials import LocalCredential

PROVISIONING_S = 1.0


@pytest.fixture
def poll_waits(monkeypatch):
    """Every wait azure-core's long-running-operation pollers make, in seconds, as they decide it (from the
    answers' Retry-After, else their 30 s default): what the SDK does, read without a stopwatch."""
    from azure.core.polling import base_polling

    waits: list[float] = []
    sleep = base_polling.LROBasePolling._sleep

    def recorded(self, delay):
        waits.append(delay)
        sleep(self, delay)

    monkeypatch.setattr(base_polling.LROBasePolling, "_sleep", recorded)
    return waits


@pytest.fixture
def served(tmp_path, monkeypatch):
    server = start_emulator(tmp_path / "local", provisioning_delay_s=PROVISIONING_S)
    server.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.cert_path))   # as serve's help says (blob uploads)
    # MLClient names its cloud in AZUREML_CURRENT_CLOUD for the whole process: undone after the test, so a later
    # test in this worker does not look up a cloud that only this one registered
    monkeypatch.setenv("AZUREML_CURRENT_CLOUD", os.environ.get("AZUREML_CURRENT_CLOUD", "AzureCloud"))
    yield server
    server.stop()


def _ml_client(server):
    from azure.ai.ml import MLClient

    url = server.url
    return MLClient(LocalCredential(server.token), TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE,
                    cloud=f"SdkUser{server.port}",
                    cloud_metadata={"resource_manager": url, "azure_portal": url, "active_directory": url,
                                    "aml_resource_id": url, "storage_endpoint": "core.windows.net",
                                    "registry_discovery_endpoint": url},
                    connection_verify=str(server.cert_path), show_progress=False, enable_telemetry=False)


def test_sdk_create_takes_the_provisioning_time_not_the_default_poll(served, poll_waits):
    ml = _ml_client(served)
    created = ml.compute.begin_create_or_update(AmlCompute(name="gpu", size="Standard_ND96asr_v4",
                                                           max_instances=1)).result()
    assert created.provisioning_state == "Succeeded"
    # without a Retry-After the SDK waits 30 s before its first poll (31 s measured, bench/bench_emulator.py):
    # the emulator's answers make it wait the provisioning time, no more
    assert poll_waits and all(0 < wait <= PROVISIONING_S for wait in poll_waits), poll_waits
    poll_waits.clear()
    ml.compute.begin_delete("gpu").result()
    assert all(0 < wait <= PROVISIONING_S for wait in poll_waits), poll_waits
    assert [c.name for c in ml.compute.list()] == []


def test_sdk_stream_shows_the_jobs_log_lines(served, tmp_path):
    ml = _ml_client(served)
    ml.compute.begin_create_or_update(AmlCompute(name="cpu", size="Standard_ND96asr_v4", max_instances=1)).result()
    ml.environments.create_or_update(Environment(name="runtime", version="1",
                                                 image="mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.py").write_text("print('hello from the job', flush=True)\nprint('second line', flush=True)\n")
    job = ml.jobs.create_or_update(command(code=str(src), command="python hello.py", environment="runtime:1",
                                           compute="cpu"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ml.jobs.stream(job.name)
    text = out.getvalue()
    assert "hello from the job\nsecond line" in text
    assert f"RunId: {job.name}" in text and "Execution Summary" in text
    assert ml.jobs.get(job.name).status == "Completed"
