"""Submit smoke jobs through the Azure ML SDK, report their progress, fetch their results, judge them.

`run_smoke(loaded_stack, provider, inputs, distributions, emit=...)` -> one SmokeVerdict per distribution; what
happens on the way is handed to `emit` as events (smoke/events.py), which the command's view draws.
`inputs`: distribution -> the smoke inputs its verdict is recorded against, as the plan computed them.
`provider` is the one the command built (azure/protocol.py Provider: its jobs run on Azure, or on the emulator
with --local).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from infra_cli.azure.errors import clean_text, describe_azure_error
from infra_cli.conventions import OUTPUTS_LEFT_OUT_LOG
from infra_cli.azure.jobs import TERMINAL
from infra_cli.azure.protocol import JobRunner, Provider
from infra_cli.azure.sdk_chatter import quiet_sdk
from infra_cli.smoke.diagnose import diagnose
from infra_cli.smoke.events import (Interrupted, JobStatusChanged, JobStillWaiting, JobSubmitted, JobTimedOut,
                                    Judged, NoResult, OutputsLeftOut, RecordLost, SmokeEvent)
from infra_cli.smoke.judge import SmokeVerdict, judge
from infra_cli.smoke.job_templates import smoke_jobs, write_smoke_job
from infra_cli.smoke.spec import RESULT_FILE, SmokeJob, safe_name
from infra_cli.stack.load import LoadedStack
from infra_cli.state.records import FAILED, INCOMPLETE, PASSED, PENDING, SmokeInputs, SmokeRecord
from infra_cli.state.store import StateStore

_WAIT_MARGIN_S = 300  # queueing and node start-up on top of the script's own timeout
_REASON_CHARS = 200   # of an incomplete smoke's reason, kept in a tag (Azure allows 256 characters a value)
STILL_EVERY_S = 10.0  # a running smoke says it is alive at least this often, as Terraform's "Still creating..."
STEP_MARKER = "infra-smoke step: "   # what the smoke script prints as each rank reaches a step (templates/smoke)


class SmokeInterrupted(KeyboardInterrupt):
    """Ctrl-C while smoke jobs ran: the jobs still running were canceled and each was said in one line.
    `stopped`: the distributions whose smoke was not judged (each recorded pending); `submitted`: how many jobs
    had been submitted when Ctrl-C came."""

    reported = True

    def __init__(self, stopped: list[str] | None = None, submitted: int = 0):
        super().__init__()
        self.stopped, self.submitted = list(stopped or []), submitted


@dataclass
class JobOutputs:
    """What a finished job left: its smoke result, every rank's NCCL debug log and std_log (name -> text)."""

    result: dict | None
    nccl_logs: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    why_no_result: str | None = None
    left_out: list[str] = field(default_factory=list)   # what of its outputs was not downloaded, and why


_LOG_TAIL_BYTES = 256 * 1024  # of each log: errors are at the end, and a chatty rank's log can be huge


def _read_tail(path: Path) -> str:
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - _LOG_TAIL_BYTES))
        return fh.read().decode("utf-8", errors="replace")


def keep_logs(downloaded: Path, job_name: str) -> str | None:
    """A copy of a job's downloaded logs and outputs that outlives the run (a new private folder in the system's
    temporary directory), so a smoke that did not pass names where its logs are, on Azure and on --local alike;
    None when nothing was downloaded."""
    if not downloaded.is_dir():
        return None
    kept = Path(tempfile.mkdtemp(prefix=f"infra-smoke-logs-{safe_name(job_name)}-"))
    shutil.copytree(downloaded, kept, dirs_exist_ok=True, symlinks=True)
    return str(kept)


def fetch_outputs(jobs: JobRunner, job_name: str, into: Path, **bounds: int) -> JobOutputs:
    """Download the job's outputs and logs, bounded (azure/jobs.py download_job: no file over its cap, nothing read
    whole into memory); the result is None (with why) when there is none to judge. What the download, or the
    local emulator's upload (OUTPUTS_LEFT_OUT_LOG: a link in outputs/ is never followed), left out is in
    `left_out`."""
    try:
        left_out = jobs.download_job(job_name, into, **bounds)
    except Exception as exc:  # any SDK failure here means: no result to judge, said in the verdict
        return JobOutputs(None, why_no_result=f"could not download the outputs of job {job_name}: "
                                              f"{type(exc).__name__}: {exc}")
    def name(path: Path) -> str:  # as Azure ML studio shows it: user_logs/std_log_process_0.txt
        return path.relative_to(into).as_posix().removeprefix("artifacts/")

    nccl = [name(p) for p in sorted(into.rglob("nccl/*.log"))]
    logs = {name(p): _read_tail(p) for p in sorted([*into.rglob("user_logs/*.txt"), *into.rglob("system_logs/*.txt"),
                                                    *into.rglob("nccl/*.log")])}
    nccl_logs = [logs[n] for n in nccl]
    left_out += [clean_text(line) for line in logs.get(OUTPUTS_LEFT_OUT_LOG, "").splitlines() if line.strip()]
    found = sorted(into.rglob(RESULT_FILE))
    if not found:
        return JobOutputs(None, nccl_logs, logs, f"job {job_name} wrote no {RESULT_FILE} under outputs/", left_out)
    try:
        return JobOutputs(json.loads(found[0].read_text(encoding="utf-8")), nccl_logs, logs, left_out=left_out)
    except (ValueError, RecursionError) as exc:   # RecursionError: nested past the parser's depth
        return JobOutputs(None, nccl_logs, logs, f"{found[0].name} of job {job_name} is not JSON: "
                          f"{exc if isinstance(exc, ValueError) else 'nested too deep'}", left_out)


def latest_steps(logs: dict[str, str]) -> str:
    """The ranks' latest step, from their logs: `all_reduce sweep (16 ranks)`, or each step with its count
    (`DDP replicas (5 steps) x12, all_reduce sweep x4`; `starting` a rank that has said none yet) while they
    are apart; empty before any rank said one."""
    latest: dict[str, int] = {}
    for text in logs.values():
        marks = [line.split(STEP_MARKER, 1)[1].strip() for line in text.splitlines() if STEP_MARKER in line]
        step = marks[-1] if marks else "starting"
        latest[step] = latest.get(step, 0) + 1
    if set(latest) == {"starting"}:
        return ""
    if len(latest) == 1:
        (step, count), = latest.items()
        return f"{step} ({count} rank{'s' if count != 1 else ''})"
    return ", ".join(f"{step} x{count}" for step, count in latest.items())


def still_waiting(jobs: JobRunner, job_name: str, distribution: str, status: str, elapsed_s: float) -> JobStillWaiting:
    """`smoke.ddp: Still Running... [20s elapsed] ranks at: all_reduce sweep (16 ranks)`. The logs are progress
    only: one that cannot be read leaves the event without the step."""
    try:
        steps = latest_steps(jobs.job_logs(job_name)) if status == "Running" else ""
    except Exception:   # the job's verdict never depends on this read
        steps = ""
    return JobStillWaiting(distribution, status, elapsed_s, steps)


def wait_for(jobs: JobRunner, job_name: str, distribution: str, timeout_s: float, emit: Callable[[SmokeEvent], Any],
             poll_s: float, still_every_s: float = STILL_EVERY_S) -> str:
    """Poll the job until it ends (or cancel it after timeout_s), reporting each change of status, and while it
    does not end an event at least every still_every_s with the time elapsed and the ranks' latest step."""
    deadline = time.monotonic() + timeout_s
    started = said = time.monotonic()
    last = None
    while True:
        status = jobs.job_status(job_name)
        now = time.monotonic()
        if status != last:
            emit(JobStatusChanged(distribution, status, now - started))
            last, said = status, now
        elif status not in TERMINAL and now - said >= still_every_s:
            emit(still_waiting(jobs, job_name, distribution, status, now - started))
            said = now
        if status in TERMINAL:
            return status
        if time.monotonic() > deadline:
            emit(JobTimedOut(distribution, job_name, status, timeout_s))
            jobs.cancel_job(job_name)
            return "TimedOut"
        time.sleep(min(poll_s, max(0.05, said + still_every_s - time.monotonic())))


def _submit(jobs: JobRunner, loaded: LoadedStack, job: SmokeJob, code_dir: Path) -> str:
    write_smoke_job(loaded, job, code_dir)
    return jobs.submit_job(job.spec, code_dir)


class SmokeRecorder:
    """Records each verdict on Azure with the inputs it was judged on (plan reads them: a smoke that failed or
    ran on other inputs is pending). The inputs were taken (by the plan, or `infra smoke`) before the jobs are
    submitted."""

    def __init__(self, loaded: LoadedStack, provider: Provider, inputs: dict[str, SmokeInputs],
                 emit: Callable[[SmokeEvent], Any]):
        self.stack, self.emit = loaded.stack.stack, emit
        self.provider, self.inputs = provider, inputs

    def record(self, distribution: str, verdict: SmokeVerdict | None, job_name: str) -> None:
        """The verdict; None: the smoke was interrupted, so it is pending (it proved nothing)."""
        at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if verdict is None:
            record = SmokeRecord(distribution, PENDING, None, job_name, at, reason="interrupted by Ctrl-C")
        else:
            result = PASSED if verdict.passed else INCOMPLETE if verdict.incomplete else FAILED
            why = verdict.findings[0].cause if verdict.incomplete and verdict.findings else verdict.incomplete
            record = SmokeRecord(distribution, result, self.inputs.get(distribution), job_name, at,
                                 reason=(why or "")[:_REASON_CHARS] or None, busbw_gbps=verdict.peak_busbw_gbs)
        try:
            StateStore(self.provider).record_smoke(self.stack, record)
        except Exception as exc:  # the verdict stands; only the plan's memory of it is lost
            self.emit(RecordLost(distribution, job_name, describe_azure_error(exc)))


def cancel_interrupted(jobs: JobRunner, recorder: SmokeRecorder, unjudged: list[tuple[str, str]],
                       emit: Callable[[SmokeEvent], Any]) -> None:
    """After Ctrl-C: cancel each smoke job not yet judged (as `az ml job cancel`), one event each, and record its
    smoke pending (the next plan shows it). A second Ctrl-C stops this too."""
    for distribution, job_name in unjudged:
        try:
            status = jobs.job_status(job_name)
            if status in TERMINAL:
                emit(Interrupted(distribution, job_name, ended_status=status))
            else:
                jobs.cancel_job(job_name)
                emit(Interrupted(distribution, job_name))
        except Exception as exc:
            emit(Interrupted(distribution, job_name, error=describe_azure_error(exc)))
        recorder.record(distribution, None, job_name)


def run_smoke(loaded_stack: LoadedStack, provider: Provider, inputs: dict[str, SmokeInputs],
              distributions: list[str] | None = None, *,
              emit: Callable[[SmokeEvent], Any], poll_s: float = 2.0,
              still_every_s: float = STILL_EVERY_S) -> list[SmokeVerdict]:
    """Submit every chosen smoke job at once, then wait for, fetch and judge each; each step and verdict is
    handed to `emit` as it happens.
    Ctrl-C (KeyboardInterrupt) cancels the jobs not yet judged and raises SmokeInterrupted."""
    jobs = smoke_jobs(loaded_stack, distributions)
    recorder = SmokeRecorder(loaded_stack, provider, inputs, emit)
    submitted: list[tuple[SmokeJob, str]] = []
    judged: set[str] = set()
    with quiet_sdk():
        try:
            return _run_jobs(loaded_stack, provider, jobs, recorder, submitted, judged, emit, poll_s, still_every_s)
        except KeyboardInterrupt:
            unjudged = [(j.name, n) for j, n in submitted if j.name not in judged]
            cancel_interrupted(provider, recorder, unjudged, emit)
            raise SmokeInterrupted([j.name for j in jobs if j.name not in judged], len(submitted)) from None


def _run_jobs(loaded_stack: LoadedStack, runner: JobRunner, jobs: list[SmokeJob], recorder: SmokeRecorder,
              submitted: list[tuple[SmokeJob, str]], judged: set[str], emit: Callable[[SmokeEvent], Any], poll_s: float,
              still_every_s: float) -> list[SmokeVerdict]:
    verdicts: list[SmokeVerdict] = []
    with tempfile.TemporaryDirectory(prefix="infra-smoke-") as tmp, quiet_sdk():
        work = Path(tmp)
        for job in jobs:
            name = _submit(runner, loaded_stack, job, work / "code" / safe_name(job.name))
            dist = loaded_stack.stack.distributions[job.name]
            emit(JobSubmitted(job.name, name, dist.instance_count, job.spec.compute or "serverless compute",
                              job.spec.distribution.get("type") or "no"))   # "no distribution": a job without a type
            submitted.append((job, name))
        for job, name in submitted:
            dist = loaded_stack.stack.distributions[job.name]
            status = wait_for(runner, name, job.name, dist.smoke.timeout_minutes * 60 + _WAIT_MARGIN_S,
                              emit, poll_s, still_every_s)
            outputs = fetch_outputs(runner, name, work / "download" / name)
            if outputs.left_out:
                emit(OutputsLeftOut(job.name, name, tuple(outputs.left_out)))
            if outputs.why_no_result:
                emit(NoResult(job.name, name, outputs.why_no_result))
            verdict = judge(outputs.result, job.sku, job.name, dist, outputs.nccl_logs, job_name=name,
                            job_status=status)
            # on the local emulator the job ran with infra's own Python, not the environment's image: its fix differs
            emulated = bool(((outputs.result or {}).get("node") or {}).get("emulated"))
            if verdict.incomplete:
                # what the job could not import, read by the same signatures: one line, not one per rank
                verdict = replace(verdict, findings=tuple(diagnose({RESULT_FILE: verdict.incomplete},
                                                                   emulated=emulated)[:1]))
            elif not verdict.passed:
                verdict = replace(verdict, findings=tuple(diagnose(outputs.logs, emulated=emulated,
                                                                   nodes=dist.instance_count)))
            if not verdict.passed:
                verdict = replace(verdict, logs_dir=keep_logs(work / "download" / name, name))
            emit(Judged(verdict))
            recorder.record(job.name, verdict, name)
            judged.add(job.name)
            verdicts.append(verdict)
    return verdicts
