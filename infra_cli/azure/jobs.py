"""Azure ML command jobs through azure-ai-ml: submit, read status, cancel, download. The smoke engine
(smoke/run.py) decides what to run and judges it; this module is the SDK under it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from azure.ai.ml.entities import Command

# Azure ML's terminal job states (azure.ai.ml.operations._run_history_constants).
TERMINAL = frozenset({"Completed", "Failed", "Canceled", "NotResponding", "Paused"})


def sdk_command_job(spec: Any, code_dir: Path | None) -> "Command":
    """A smoke job's spec (smoke/spec.py CommandJobSpec) as azure.ai.ml.command(...) builds it: the same job as
    the rendered YAML."""
    from azure.ai.ml import MpiDistribution, PyTorchDistribution, TensorFlowDistribution, command

    block = dict(spec.distribution)
    kind = block.pop("type")
    distribution = {"pytorch": PyTorchDistribution, "mpi": MpiDistribution,
                    "tensorflow": TensorFlowDistribution}[kind](**block)
    return command(
        code=str(code_dir) if code_dir is not None else None,
        command=spec.command,
        environment=sdk_environment(spec.environment),
        compute=spec.compute.removeprefix("azureml:"),
        instance_count=spec.instance_count,
        distribution=distribution,
        environment_variables=dict(spec.environment_variables),
        experiment_name=spec.experiment_name,
        display_name=spec.display_name,
        description=spec.description,
        tags=dict(spec.tags),
        timeout=spec.timeout_s,
    )


def sdk_environment(reference: str) -> str:
    """A job's environment as azure-ai-ml's `command(environment=...)` takes it: a registry URI
    (azureml://registries/...) whole, a workspace reference without its `azureml:` prefix."""
    return reference if reference.startswith("azureml://") else reference.removeprefix("azureml:")


def submit_job(ml: Any, spec: Any, code_dir: Path) -> str:
    """Submit the job; its name on Azure."""
    return ml.jobs.create_or_update(sdk_command_job(spec, code_dir)).name


def job_status(ml: Any, job_name: str) -> str:
    status = ml.jobs.get(job_name).status
    return str(getattr(status, "value", status))


def cancel_job(ml: Any, job_name: str) -> None:
    ml.jobs.begin_cancel(job_name).result()


def download_job(ml: Any, job_name: str, into: Path) -> None:
    """Every output and log of the job, under `into` (azure-ai-ml's layout: artifacts/..., named outputs)."""
    ml.jobs.download(job_name, download_path=str(into), all=True)


def job_logs(ml: Any, job_name: str) -> dict[str, str]:
    """The job's user logs so far (name -> text, e.g. user_logs/std_log_process_0.txt), read as azure-ai-ml's
    `jobs.stream` (`az ml job stream`) reads them while a job runs: run history's log files, each a SAS URL."""
    from azure.ai.ml._utils.utils import download_text_from_url

    files = ml.jobs._runs_operations.get_run_details(job_name).log_files or {}
    return {name: download_text_from_url(url, ml.jobs._requests_pipeline, timeout=10)
            for name, url in sorted(files.items()) if name.startswith("user_logs/")}
