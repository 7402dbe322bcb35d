"""What a real GPU run showed (tests/fixtures/nccl_logs/RECORDED.md: the rendered smoke script on one H200 with
NCCL 2.28.9), judged and diagnosed as a user must read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra_cli.knowledge.nccl_transport import transport_rules
from infra_cli.knowledge.skus import load_catalog
from infra_cli.smoke.diagnose import diagnose
from infra_cli.smoke.judge import judge
from infra_cli.smoke.job_templates import render_smoke_script
from infra_cli.smoke.transport import classify_transport
from infra_cli.stack.model import Distribution

LOGS = Path(__file__).parent / "fixtures" / "nccl_logs"
ONE_RANK = LOGS / "h200_single_rank_recorded"
TWO_ON_ONE_GPU = LOGS / "h200_two_ranks_one_gpu_recorded"


def lines(folder: Path) -> list[str]:
    return [line for p in sorted(folder.glob("*.log")) for line in p.read_text().splitlines()]


def one_node(processes: int = 1) -> Distribution:
    return Distribution(cluster="c", environment="e", type="pytorch", instance_count=1,
                        process_count_per_instance=processes)


def test_a_one_rank_communicator_is_no_socket_fallback():
    """NCCL printed `Using network Socket` for a communicator of one rank, which sends nothing anywhere."""
    assert any("Using network Socket" in line for line in lines(ONE_RANK))
    report = classify_transport(lines(ONE_RANK), transport_rules().plain)
    assert report["transport"] == "single-rank", report
    assert any("nRanks 1 nNodes 1" in line for line in report["evidence"])


def test_a_one_rank_subgroup_beside_a_socket_job_still_reads_as_socket():
    """A run may hold a one-rank communicator beside its real one: the real one's transport is the verdict."""
    socket_job = lines(LOGS / "socket_fallback_2node")
    report = classify_transport([*lines(ONE_RANK), *socket_job], transport_rules().plain)
    assert report["transport"] == "socket", report


def _judged(size: str):
    result = json.loads((ONE_RANK / "smoke-result.json").read_text())
    verdict = judge(result, load_catalog().get(size), "ddp", one_node(), [p.read_text() for p in ONE_RANK.glob("*.log")])
    return verdict, {j.name: j for j in verdict.judgements}


def test_the_recorded_one_rank_result_passes_on_a_one_gpu_size_with_no_busbw_figure_shown():
    verdict, judged = _judged("Standard_NC40ads_H100_v5")   # one GPU, as the machine recorded had
    assert verdict.passed and verdict.transport == "single-rank", verdict
    assert judged["busbw"].outcome == "skipped" and "0.000" not in judged["busbw"].detail
    assert "one rank" in judged["busbw"].detail


def test_the_same_machine_judged_as_an_eight_gpu_size_fails_its_device_check():
    verdict, judged = _judged("Standard_ND96isr_H200_v5")
    assert not verdict.passed and judged["device"].outcome == "fail" and "sees 1" in judged["device"].detail


def test_the_script_s_summary_shows_no_busbw_for_one_rank():
    namespace: dict = {"__name__": "ddp_smoke"}
    exec(compile(render_smoke_script("ddp_smoke.py"), "ddp_smoke.py", "exec"), namespace)
    result = json.loads((ONE_RANK / "smoke-result.json").read_text())
    line = namespace["summary_line"](result)
    assert "busbw=n/a(one-rank)" in line and "busbw_peak" not in line, line
    two = dict(result, bandwidth=dict(result["bandwidth"], world_size=2, peak_busbw_gbs=12.5))
    assert "busbw_peak=12.500GB/s" in namespace["summary_line"](two)


def _logs(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_two_ranks_on_one_gpu_is_named_and_infiniband_is_no_lead_on_one_node():
    """The recorded failure: NCCL refused two ranks on one GPU. Its files also say `NET/IB : No device found`,
    which on one node explains nothing: before, that was the first finding shown."""
    findings = diagnose(_logs(TWO_ON_ONE_GPU), nodes=1)
    assert findings[0].signature == "nccl-duplicate-gpu", findings
    assert "process_count_per_instance" in (findings[0].fix or "") and "GPU 60" in findings[0].cause
    assert "nccl-ib-no-device" not in {f.signature for f in findings}


@pytest.mark.parametrize("nodes", [2, None])
def test_no_infiniband_device_is_still_a_lead_for_several_nodes_or_when_unknown(nodes):
    signatures = [f.signature for f in diagnose(_logs(TWO_ON_ONE_GPU), nodes=nodes)]
    assert signatures[0] == "nccl-duplicate-gpu" and "nccl-ib-no-device" in signatures
