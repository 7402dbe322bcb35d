"""Layers walked by several threads at once (issue 25) keep the check's bounds and its top-down meaning: the
verdict, the early exit and which refusal is reported are those of a walk from the top layer down, the
paths one image may index are shared by every walk, and the first refusal (or the verdict) stops them all.

In-process `check_image(..., workers=N)` on OCI layouts written by test_image_hostile's helpers: workers=2
walks two layers at once whatever the machine's cores.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_image_hostile import GIB, entry, layout_with, tar_header  # noqa: E402
from test_image_hostile_layers import EVIDENCE, files, layer  # noqa: E402
from infra_cli.image.check import check_image  # noqa: E402
from infra_cli.image.errors import ImageReadError, Stopped  # noqa: E402
from infra_cli.image.layers import PathBudget  # noqa: E402

# A hang guard, not a speed bound: join returns as soon as the thread ends; only one that never ends waits it out.
HANG_GUARD_S = 300


def without_timing(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("seconds", "bytes_read")}


# the top layer that decides the verdict alone: the evidence and the first-ranked version source (dpkg's)
DPKG = entry(b"var/lib/dpkg/status", b"Package: openmpi-bin\nStatus: install ok installed\nVersion: 4.1.4-3\n\n")


def refusal(ref: str, workers: int, **kwargs) -> str:
    with pytest.raises(ImageReadError) as caught:
        check_image(ref, workers=workers, timeout=60, **kwargs)
    return caught.value.message


# ---- the paths one image may index ------------------------------------------------------------------------

def small_budget(layers: int, paths: int) -> PathBudget:
    budget = PathBudget(layers, paths=paths, names=paths)
    budget.GRANT_PATHS = budget.GRANT_NAMES = 1      # grants of exactly what is asked
    return budget


def grant_in_thread(budget: PathBudget, rank: int, paths: int) -> tuple[threading.Thread, list]:
    got: list = []

    def ask() -> None:
        try:
            got.append(budget.grant(rank, paths, 0))
        except Stopped:
            got.append("stopped")
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("upper_uses, lower_gets", [(70, None), (30, (60, 1))])
def test_a_lower_layer_walked_ahead_never_starves_the_layers_above(upper_uses, lower_gets):
    """Top-down, a lower layer's 60 paths fit only if the layer above used 40 or fewer of the 100: walked
    ahead, it may not take them first (and make the upper layer fail where a top-down walk would not)."""
    budget = small_budget(2, 100)
    lower, got = grant_in_thread(budget, 1, 60)            # would leave less than half: waits for the head
    assert budget.grant(0, upper_uses, 0) == (upper_uses, 1)
    budget.finish(0, 0, 0)
    lower.join(HANG_GUARD_S)
    assert got == [lower_gets]


def test_the_head_is_refused_past_the_bound_and_a_cancelled_wait_stops():
    budget = small_budget(3, 100)
    assert budget.grant(0, 80, 0) == (80, 1)
    assert budget.grant(0, 30, 0) is None                  # the head, past the bound: the image is refused
    waiting, got = grant_in_thread(budget, 2, 60)
    budget.cancel()                                        # the check ended: a walk waiting for grants ends too
    waiting.join(HANG_GUARD_S)
    assert got == ["stopped"]


# ---- results and refusals in top-down order --------------------------------------------------------------

def test_walking_layers_at_once_reports_what_a_top_down_walk_reports(tmp_path: Path):
    ref = layout_with(tmp_path, [
        layer(files("usr/share/a", "usr/share/b", "usr/lib/libmpi.so.40")),
        layer(entry(b"usr/share/.wh.a", b""), files(EVIDENCE[0])),
        layer(files(*EVIDENCE[1:]), files(*(f"usr/share/doc/{i}" for i in range(200)))),
    ])
    for early_exit in (True, False):
        one = check_image(ref, early_exit=early_exit, workers=1, timeout=60).to_json()
        assert one["ok"], one
        for workers in (2, 3):
            assert without_timing(check_image(ref, early_exit=early_exit, workers=workers, timeout=60).to_json()) \
                == without_timing(one)


def test_a_refused_lower_layer_is_judged_only_when_the_layers_above_leave_the_verdict_open(tmp_path: Path):
    """A lower layer walked ahead and refused is not reported while the upper layers may still decide."""
    cut = layer(files("opt/x"), tar_header(b"more", 0)[:100], end=b"")
    decided = layout_with(tmp_path, [cut, layer(files(*EVIDENCE), DPKG)], tag="decided")
    result = check_image(decided, workers=2, timeout=60)
    assert result.ok and result.layers_read == 1, result.to_json()
    open_verdict = layout_with(tmp_path, [cut, layer(files(EVIDENCE[0]))], tag="open")
    message = refusal(open_verdict, workers=2)
    assert "layer 1 of 2" in message and "ends in the middle of a tar header" in message, message


def test_the_first_refusal_stops_the_walks_below_it(tmp_path: Path):
    """The top layer is refused at once; the layer below inflates to 35 GiB of zeros (35 MB of gzip). The check
    says why within the hostile-input bound, with no --timeout: the walk below stops, not at its end."""
    from isal import isal_zlib

    comp, block = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31), bytes(16 << 20)
    gib = b"".join(comp.compress(block) for _ in range(GIB // len(block))) + comp.flush()
    huge = isal_zlib.compress(tar_header(b"big", 7 * GIB), 1, wbits=31) + gib * 7
    ref = layout_with(tmp_path, [huge * 5, layer(files(*EVIDENCE), entry(b"bad", b"")[:300], end=b"")])
    outcome: list = []

    def run() -> None:
        try:
            check_image(ref, workers=2, timeout=None)
        except ImageReadError as exc:
            outcome.append(exc.message)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "the walk of the layer below went on after the top layer was refused"
    assert outcome and "layer 2 of 2" in outcome[0] and "tar" in outcome[0], outcome


@pytest.mark.parametrize("load, spare", [(0.1, 2), (1.0, 1), (12.0, 1)])
def test_layers_are_walked_at_once_only_on_cores_the_machine_leaves_idle(monkeypatch, load, spare):
    from infra_cli.image import check

    monkeypatch.setattr(check.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(check.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(check.os, "getloadavg", lambda: (load, load, load))
    assert check.spare_cores() == spare
