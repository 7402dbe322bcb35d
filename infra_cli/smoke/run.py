"""Submit smoke jobs through the Azure ML SDK, stream their progress, fetch their results, judge them.

`run_smoke(loaded_stack, clients, distributions, stream=print)` -> one SmokeVerdict per distribution.
`clients` is infra_cli.azure.clients.AzureClients (`.ml` an MLClient: Azure, or the emulator with --local).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from infra_cli.azure.quiet import quiet_sdk
from infra_cli.smoke.judge import SmokeVerdict, judge
from infra_cli.smoke.render import smoke_jobs, write_smoke_job
from infra_cli.smoke.spec import RESULT_FILE, CommandJobSpec, SmokeJob, safe_name
from infra_cli.stack.load import LoadedStack

if TYPE_CHECKING:
    from azure.ai.ml.entities import Command

# Azure ML's terminal job states (azure.ai.ml.operations._run_history_constants).
TERMINAL = frozenset({"Completed", "Failed", "Canceled", "NotResponding", "Paused"})
_WAIT_MARGIN_S = 300  # queueing and node start-up on top of the script's own timeout


def sdk_command_job(spec: CommandJobSpec, code_dir: Path | None) -> "Command":
    """The same job as the rendered YAML, built with azure.ai.ml.command(...)."""
    from azure.ai.ml import MpiDistribution, PyTorchDistribution, TensorFlowDistribution, command

    block = dict(spec.distribution)
    kind = block.pop("type")
    distribution = {"pytorch": PyTorchDistribution, "mpi": MpiDistribution,
                    "tensorflow": TensorFlowDistribution}[kind](**block)
    return command(
        code=str(code_dir) if code_dir is not None else None,
        command=spec.command,
        environment=spec.environment.removeprefix("azureml:"),
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


def fetch_result(ml: Any, job_name: str, into: Path) -> tuple[dict | None, list[str], str | None]:
    """Download the job's outputs; -> (smoke result or None, every NCCL debug log's text, why none)."""
    try:
        ml.jobs.download(job_name, download_path=str(into), all=True)
    except Exception as exc:  # any SDK failure here means: no result to judge, said in the verdict
        return None, [], f"could not download the outputs of job {job_name}: {type(exc).__name__}: {exc}"
    found = sorted(into.rglob(RESULT_FILE))
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(into.rglob("nccl/*.log"))]
    if not found:
        return None, logs, f"job {job_name} wrote no {RESULT_FILE} under outputs/"
    try:
        return json.loads(found[0].read_text(encoding="utf-8")), logs, None
    except ValueError as exc:
        return None, logs, f"{found[0].name} of job {job_name} is not JSON: {exc}"


def wait_for(ml: Any, job_name: str, label: str, timeout_s: float, stream: Callable[[str], Any],
             poll_s: float) -> str:
    """Poll the job until it ends (or cancel it after timeout_s), streaming each change of status."""
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    last = None
    while True:
        status = _status_text(ml.jobs.get(job_name).status)
        if status != last:
            stream(f"{label}: {status} ({time.monotonic() - started:.0f}s)")
            last = status
        if status in TERMINAL:
            return status
        if time.monotonic() > deadline:
            stream(f"{label}: still {status} after {timeout_s:.0f}s, canceling job {job_name}")
            ml.jobs.begin_cancel(job_name).result()
            return "TimedOut"
        time.sleep(poll_s)


def _status_text(status: Any) -> str:
    return str(getattr(status, "value", status))


def _submit(ml: Any, loaded: LoadedStack, job: SmokeJob, code_dir: Path) -> str:
    write_smoke_job(loaded, job, code_dir)
    created = ml.jobs.create_or_update(sdk_command_job(job.spec, code_dir))
    return created.name


def run_smoke(loaded_stack: LoadedStack, clients: Any, distributions: list[str] | None = None, *,
              stream: Callable[[str], Any] = print, poll_s: float = 2.0) -> list[SmokeVerdict]:
    """Submit every chosen smoke job at once, then wait for, fetch and judge each; the verdicts are streamed."""
    jobs = smoke_jobs(loaded_stack, distributions)
    ml = clients.ml
    verdicts: list[SmokeVerdict] = []
    with tempfile.TemporaryDirectory(prefix="infra-smoke-") as tmp, quiet_sdk():
        work = Path(tmp)
        submitted = []
        for job in jobs:
            name = _submit(ml, loaded_stack, job, work / "code" / safe_name(job.name))
            dist = loaded_stack.stack.distributions[job.name]
            stream(f"smoke.{job.name}: submitted job {name} ({dist.instance_count} node(s) of {job.spec.compute}, "
                   f"{job.spec.distribution['type']} distribution)")
            submitted.append((job, name))
        for job, name in submitted:
            dist = loaded_stack.stack.distributions[job.name]
            status = wait_for(ml, name, f"smoke.{job.name}", dist.smoke.timeout_minutes * 60 + _WAIT_MARGIN_S,
                              stream, poll_s)
            result, logs, why = fetch_result(ml, name, work / "download" / name)
            if why:
                stream(f"smoke.{job.name}: {why}")
            verdict = judge(result, job.sku, job.name, dist, logs, job_name=name, job_status=status)
            stream(verdict.summary())
            for j in verdict.judgements:
                stream(f"  {j.outcome:<7} {j.name}: {j.detail}")
            verdicts.append(verdict)
    return verdicts
