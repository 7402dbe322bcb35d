"""A smoke run's events (smoke/events.py) drawn as the lines `infra smoke` and `infra apply` print while it runs."""

from __future__ import annotations

from typing import Any, Callable, get_args

from infra_cli.smoke.events import (JobStatusChanged, JobStillWaiting, JobSubmitted, JobTimedOut, Judged, NoResult,
                                    OutputsLeftOut, RecordLost, SmokeEvent)
from infra_cli.smoke.judge import SmokeVerdict


def incomplete_line(verdict: SmokeVerdict) -> str:
    """The one line of a smoke whose framework could not run: what is missing, how to get it, that it stays pending."""
    finding = verdict.findings[0] if verdict.findings else None
    what = f"{finding.cause}; fix: {finding.fix}" if finding and finding.fix else (
        finding.cause if finding else str(verdict.incomplete))
    return (f"smoke.{verdict.distribution}: INCOMPLETE (not PASSED): {what}. The smoke stays pending: "
            "the next apply runs it again")


def _verdict_lines(verdict: SmokeVerdict) -> list[str]:
    if verdict.incomplete:
        return [incomplete_line(verdict)] + ([logs_line(verdict)] if verdict.logs_dir else [])
    lines = [verdict.summary()]
    lines += [f"  {j.outcome:<7} {j.name}: " + j.detail for j in verdict.judgements]   # + keeps a detail's steps
    for finding in verdict.findings:
        lines += finding.render()
    if verdict.logs_dir:
        lines.append(logs_line(verdict))
    return lines


def logs_line(verdict: SmokeVerdict) -> str:
    """Where a smoke that did not pass left its logs (user_logs/std_log*.txt per rank, the NCCL debug files)."""
    return (f"  logs:   {verdict.logs_dir} (job {verdict.job_name}'s user_logs/ and outputs/, downloaded; on Azure "
            "also in the job's page in Azure ML studio)")


_EVENTS = get_args(SmokeEvent)


def event_lines(event: SmokeEvent) -> list[str]:
    if not isinstance(event, _EVENTS):
        raise TypeError(f"not a smoke event: {event!r}")
    if isinstance(event, Judged):
        return _verdict_lines(event.verdict)
    label = f"smoke.{event.distribution}"
    if isinstance(event, JobSubmitted):
        return [f"{label}: submitted job {event.job_name} ({event.nodes} node(s) of {event.compute}, "
                f"{event.distribution_type} distribution)"]
    if isinstance(event, JobStatusChanged):
        return [f"{label}: {event.status} ({event.elapsed_s:.0f}s)"]
    if isinstance(event, JobStillWaiting):
        steps = f" ranks at: {event.steps}" if event.steps else ""
        return [f"{label}: Still {event.status}... [{event.elapsed_s:.0f}s elapsed]" + steps]
    if isinstance(event, JobTimedOut):
        return [f"{label}: still {event.status} after {event.timeout_s:.0f}s, canceling job {event.job_name}"]
    if isinstance(event, NoResult):
        return [f"{label}: {event.why}"]
    if isinstance(event, OutputsLeftOut):
        head = (f"{label}: warning: {len(event.entries)} of job {event.job_name}'s outputs left out (a link is never "
                "followed, a file over infra's bound is never read):")
        return [head] + [f"  {entry}" for entry in event.entries]
    if isinstance(event, RecordLost):
        return [f"{label}: could not record the result on Azure (the next plan will show this smoke as pending): "
                f"{event.why}"]
    if event.error is not None:   # Interrupted, the one event left
        return [f"{label}: interrupted; job {event.job_name} could not be canceled ({event.error}): "
                f"cancel it with `az ml job cancel --name {event.job_name}`"]
    if event.ended_status is not None:
        return [f"{label}: interrupted, job {event.job_name} had already ended ({event.ended_status})"]
    return [f"{label}: interrupted, job {event.job_name} canceled"]


def smoke_progress(write: Callable[[str], Any]) -> Callable[[SmokeEvent], None]:
    """What run_smoke is handed: each event drawn, each line written with `write` (commands/terminal.py
    progress_stream)."""
    def draw(event: SmokeEvent) -> None:
        for line in event_lines(event):
            write(line)

    return draw
