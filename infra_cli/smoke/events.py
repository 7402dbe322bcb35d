"""What a smoke run reports while it runs, as data: commands/views/smoke_progress.py draws each event as a line.

Each event names its distribution; the engine prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from infra_cli.smoke.judge import SmokeVerdict


@dataclass(frozen=True)
class JobEvent:
    """An event of one submitted job: its distribution and the job's name on Azure."""
    distribution: str
    job_name: str


@dataclass(frozen=True)
class JobSubmitted(JobEvent):
    nodes: int
    compute: str
    distribution_type: str


@dataclass(frozen=True)
class JobProgress:
    """Where a distribution's job stands while it is awaited: its status, the seconds since it was submitted."""
    distribution: str
    status: str
    elapsed_s: float


@dataclass(frozen=True)
class JobStatusChanged(JobProgress):
    """The job's status changed."""


@dataclass(frozen=True)
class JobStillWaiting(JobProgress):
    """No change of status for a while; while it runs, the ranks' latest step ("" unknown)."""
    steps: str


@dataclass(frozen=True)
class JobTimedOut(JobEvent):
    """The job outlived its timeout and is being canceled."""
    status: str
    timeout_s: float


@dataclass(frozen=True)
class NoResult(JobEvent):
    """The job ended without a result file; `why` says what it left instead."""
    why: str


@dataclass(frozen=True)
class OutputsLeftOut(JobEvent):
    """What of the job's outputs was not downloaded (a link never followed, a file over infra's bound), one line
    each, `outputs/NAME: why`."""
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Judged:
    verdict: SmokeVerdict


@dataclass(frozen=True)
class RecordLost(JobEvent):
    """The verdict of job `job_name` stands, but could not be recorded on Azure (`why`: Azure's error)."""
    why: str


@dataclass(frozen=True)
class Interrupted(JobEvent):
    """After Ctrl-C: the job had ended (`ended_status`), was canceled, or could not be canceled (`error`)."""
    ended_status: str | None = None
    error: str | None = None


SmokeEvent = Union[JobSubmitted, JobStatusChanged, JobStillWaiting, JobTimedOut, NoResult, OutputsLeftOut, Judged,
                   RecordLost, Interrupted]
