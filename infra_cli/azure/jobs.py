"""Azure ML command jobs through azure-ai-ml: submit, read status, cancel, download. The smoke engine
(smoke/run.py) decides what to run and judges it; this module is the SDK under it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra_cli.stack.secret import revealed

if TYPE_CHECKING:
    from azure.ai.ml.entities import Command

# Azure ML's terminal job states (azure.ai.ml.operations._run_history_constants).
TERMINAL = frozenset({"Completed", "Failed", "Canceled", "NotResponding", "Paused"})


def sdk_command_job(spec: Any, code_dir: Path | None) -> "Command":
    """A smoke job's spec (smoke/spec.py CommandJobSpec) as azure.ai.ml.command(...) builds it: the same job as
    the rendered YAML."""
    from azure.ai.ml import MpiDistribution, PyTorchDistribution, RayDistribution, TensorFlowDistribution, command

    block = dict(spec.distribution)
    kind = block.pop("type", None)   # none: a job without a distribution
    queue = spec.job_fields.get("queue_settings") or {}   # a serverless job's tier (smoke/spec.py)
    distribution = {"pytorch": PyTorchDistribution, "mpi": MpiDistribution, "tensorflow": TensorFlowDistribution,
                    "ray": RayDistribution}[kind](**block) if kind else None
    return command(
        code=str(code_dir) if code_dir is not None else None,
        command=spec.command,
        environment=sdk_environment(spec.environment),
        compute=spec.compute.removeprefix("azureml:") if spec.compute else None,   # None: serverless compute
        instance_count=spec.instance_count,
        instance_type=spec.resources.get("instance_type"),
        job_tier=queue.get("job_tier"),
        priority=queue.get("priority"),
        distribution=distribution,
        # the request body: a secret (stack/secret.py) is sent in clear here, as nowhere else
        environment_variables=revealed(dict(spec.environment_variables)),
        experiment_name=spec.experiment_name,
        display_name=spec.display_name,
        description=revealed(spec.description),
        tags=revealed(dict(spec.tags)),
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


# What infra downloads of a job it judges (a smoke job's result, logs and NCCL debug files are a few MiB): a file
# over MAX_JOB_FILE_BYTES is left out (a log: only its last LOG_TAIL_BYTES, all that is read of it), and nothing
# past MAX_JOB_DOWNLOAD_BYTES in all
MAX_JOB_FILE_BYTES = 64 << 20
MAX_JOB_DOWNLOAD_BYTES = 512 << 20
LOG_TAIL_BYTES = 256 * 1024
_LOG_FOLDERS = ("user_logs/", "system_logs/", "azureml-logs/", "logs/")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def download_job(ml: Any, job_name: str, into: Path, *, max_file_bytes: int = MAX_JOB_FILE_BYTES,
                 max_bytes: int = MAX_JOB_DOWNLOAD_BYTES) -> list[str]:
    """The job's logs and ./outputs (its default artifacts) under `into`/artifacts/, as `az ml job download` lays
    them out, but bounded: azure-ai-ml's download reads every blob whole into memory (a 1.5 GiB output file is
    1.5 GiB of memory, and more), so each blob is streamed to a new file (O_EXCL, no link followed), one over
    `max_file_bytes` is left out (of a log, its tail is kept), and nothing past `max_bytes` in all. Returns what
    was left out, one line each (`outputs/big.bin: 1.5 GiB, over ...`). Named outputs are not downloaded: a smoke
    judges none."""
    from azure.ai.ml._artifacts._artifact_utilities import get_datastore_info
    from azure.ai.ml._utils._storage_utils import AzureMLDatastorePathUri, get_storage_client

    uri = ml.jobs._get_named_output_uri(job_name, "default").get("default")
    if uri is None:
        return []
    parsed = AzureMLDatastorePathUri(uri)
    storage = get_storage_client(**get_datastore_info(ml.jobs._datastore_operations, parsed.datastore))
    container = getattr(storage, "container_client", None)
    if container is None:
        raise ValueError(f"the job's artifacts are on a {type(storage).__name__}, not a blob container")
    prefix = parsed.path.rstrip("/") + "/"
    left_out: list[str] = []
    total = 0
    for blob in container.list_blobs(name_starts_with=prefix, include="metadata"):
        rel = blob.name[len(prefix):]
        parts = rel.split("/")
        if (blob.metadata or {}).get("hdi_isfolder") == "true":
            continue
        if not rel or any(p in ("", ".", "..") for p in parts) or any(ord(c) < 0x20 for c in rel):
            left_out.append(f"{rel!r}: not a plain file name")
            continue
        size = blob.size or 0
        offset = 0
        if size > max_file_bytes:
            if not rel.startswith(_LOG_FOLDERS):
                left_out.append(f"{rel}: {size} bytes, over the {_mib(max_file_bytes)} infra downloads of a "
                                "job's file: not downloaded")
                continue
            offset = size - LOG_TAIL_BYTES   # a log is read by its end: its last bytes only
        if total + (size - offset) > max_bytes:
            left_out.append(f"{rel}: past the {_mib(max_bytes)} infra downloads of a job in all: not downloaded")
            continue
        total += size - offset
        target = into / "artifacts" / Path(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:   # a name that is also a folder's, or twice
            left_out.append(f"{rel}: not written ({exc.strerror})")
            continue
        with os.fdopen(fd, "wb") as fh:
            if size > offset:   # streamed in chunks, never held whole; at most what the listing said
                container.download_blob(blob.name, offset=offset, length=size - offset).readinto(fh)
    return left_out


def job_logs(ml: Any, job_name: str) -> dict[str, str]:
    """The job's user logs so far (name -> text, e.g. user_logs/std_log_process_0.txt), read as azure-ai-ml's
    `jobs.stream` (`az ml job stream`) reads them while a job runs: run history's log files, each a SAS URL."""
    from azure.ai.ml._utils.utils import download_text_from_url

    files = ml.jobs._runs_operations.get_run_details(job_name).log_files or {}
    return {name: download_text_from_url(url, ml.jobs._requests_pipeline, timeout=10)
            for name, url in sorted(files.items()) if name.startswith("user_logs/")}
