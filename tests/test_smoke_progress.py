"""A smoke run's events drawn as the lines `infra smoke` and `infra apply` print (commands/views/smoke_progress.py):
the engine hands data, the view words it."""

from __future__ import annotations

import pytest

from infra_cli.commands.views.smoke_progress import event_lines, smoke_progress
from infra_cli.smoke.diagnose import Finding
from infra_cli.smoke.events import (Interrupted, JobStatusChanged, JobStillWaiting, JobSubmitted, JobTimedOut,
                                    Judged, NoResult, RecordLost)
from infra_cli.smoke.judge import Judgement, SmokeVerdict


@pytest.mark.parametrize("event, line", [
    (JobSubmitted("ddp", "job-1", 2, "gpu", "PyTorch"),
     "smoke.ddp: submitted job job-1 (2 node(s) of gpu, PyTorch distribution)"),
    (JobStatusChanged("ddp", "Running", 12.4), "smoke.ddp: Running (12s)"),
    (JobStillWaiting("ddp", "Running", 20.2, "all_reduce sweep (16 ranks)"),
     "smoke.ddp: Still Running... [20s elapsed] ranks at: all_reduce sweep (16 ranks)"),
    (JobStillWaiting("ddp", "Queued", 20.2, ""), "smoke.ddp: Still Queued... [20s elapsed]"),
    (JobTimedOut("ddp", "job-1", "Running", 900.0), "smoke.ddp: still Running after 900s, canceling job job-1"),
    (NoResult("ddp", "job-1", "the job left no result"), "smoke.ddp: the job left no result"),
    (RecordLost("ddp", "job-1", "(Forbidden) no"),
     "smoke.ddp: could not record the result on Azure (the next plan will show this smoke as pending): (Forbidden) no"),
    (Interrupted("ddp", "job-1"), "smoke.ddp: interrupted, job job-1 canceled"),
    (Interrupted("ddp", "job-1", ended_status="Completed"),
     "smoke.ddp: interrupted, job job-1 had already ended (Completed)"),
    (Interrupted("ddp", "job-1", error="(Conflict) busy"),
     "smoke.ddp: interrupted; job job-1 could not be canceled ((Conflict) busy): "
     "cancel it with `az ml job cancel --name job-1`"),
])
def test_each_event_is_one_line(event, line):
    assert event_lines(event) == [line]


def test_a_verdict_is_its_summary_its_judgements_and_its_findings():
    finding = Finding("NCCL found no InfiniBand device", "use an InfiniBand size", ("NET/IB : No device found",),
                      ("rank_0.txt",))
    verdict = SmokeVerdict("ddp", False, (Judgement("ranks", "pass", "2 of 2"), Judgement("busbw", "fail", "low")),
                           "socket", 1.5, 150.0, findings=(finding,))
    assert event_lines(Judged(verdict)) == [verdict.summary(), "  pass    ranks: 2 of 2", "  fail    busbw: low",
                                           *finding.render()]


def test_an_incomplete_verdict_is_one_line_saying_it_stays_pending():
    finding = Finding("tensorflow is not installed", "pip install tensorflow", (), ())
    verdict = SmokeVerdict("tf", False, (), "unknown", incomplete="No module named 'tensorflow'", findings=(finding,))
    assert event_lines(Judged(verdict)) == [
        "smoke.tf: INCOMPLETE (not PASSED): tensorflow is not installed; fix: pip install tensorflow. "
        "The smoke stays pending: the next apply runs it again"]


def test_the_progress_writes_every_line_of_an_event():
    written = []
    smoke_progress(written.append)(Judged(SmokeVerdict("ddp", True, (Judgement("ranks", "pass", "2 of 2"),), "ib")))
    assert written == ["smoke.ddp: PASSED  transport=ib  busbw=n/a", "  pass    ranks: 2 of 2"]


def test_something_else_is_not_drawn():
    with pytest.raises(TypeError, match="not a smoke event"):
        event_lines("smoke.ddp: a line")
