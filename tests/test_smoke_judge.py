"""The transport classifier and the judge, on recorded NCCL debug logs and per-size thresholds."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra_cli.knowledge.skus import load_catalog
from infra_cli.knowledge.nccl_transport import transport_rules
from infra_cli.smoke.judge import judge
from infra_cli.smoke.transport import classify_transport, evidence_lines
from infra_cli.stack.model import Distribution

LOGS = Path(__file__).parent / "fixtures" / "nccl_logs"


def logs(name: str) -> list[str]:
    return [p.read_text() for p in sorted((LOGS / name).glob("*.log"))]


def lines(name: str) -> list[str]:
    return [line for text in logs(name) for line in text.splitlines()]


def gpu_result(busbw: float, world: int = 16, checks_ok: bool = True) -> dict:
    """A result as the smoke script writes it on GPUs (the shape the script's own tests produce on CPU)."""
    return {
        "kind": "ddp-smoke", "device": "cuda", "backend": "nccl", "passed": checks_ok,
        "world": {"world_size": world},
        "checks": [{"name": "world_size", "ok": True, "detail": "16 == 2 x 8"},
                   {"name": "replicas_identical", "ok": checks_ok, "detail": "…"},
                   {"name": "gpus_per_node", "ok": None, "detail": "skipped"}],
        "bandwidth": {"peak_busbw_gbs": busbw, "peak_bytes": 1 << 30},
    }


def dist(instance_count: int = 2, fraction: float = 0.8, cluster: str = "c") -> Distribution:
    return Distribution(cluster=cluster, environment="e", type="pytorch", instance_count=instance_count,
                        process_count_per_instance=8, smoke={"busbw_fraction": fraction})


@pytest.fixture(scope="module")
def rules():
    return transport_rules().plain


@pytest.mark.parametrize("case, transport, gdrdma", [
    ("ib_a100_2node", "infiniband", False),
    ("ib_gdrdma_h100_2node", "infiniband", True),
    ("socket_fallback_2node", "socket", False),
    ("nvlink_a100_1node", "nvlink", False),
])
def test_classifies_recorded_logs(rules, case, transport, gdrdma):
    report = classify_transport(lines(case), rules)
    assert report["transport"] == transport
    assert report["gdrdma"] is gdrdma
    assert report["evidence"], "the report keeps the lines it decided on"


def test_report_details(rules):
    ib = classify_transport(lines("ib_gdrdma_h100_2node"), rules)
    assert ib["networks"] == ["IBext_v8"] and ib["channel_nets"] == ["IBext_v8"]
    assert ib["ib_link_layers"] == ["IB"] and ib["ib_device_found"] and ib["nccl_nodes"] == 2
    nvl = classify_transport(lines("nvlink_a100_1node"), rules)
    # "Using network IB" on one node proves nothing: no channel ran over the network.
    assert nvl["networks"] == ["IB"] and nvl["channel_nets"] == [] and nvl["nccl_nodes"] == 1


def test_one_socket_channel_spoils_an_ib_run(rules):
    mixed = lines("ib_a100_2node") + ["n:1:2 [3] NCCL INFO Channel 01/0 : 3[3] -> 11[3] [send] via NET/Socket/1"]
    assert classify_transport(mixed, rules)["transport"] == "socket"


def test_using_network_ib_alone_is_not_infiniband(rules):
    only_init = [l for l in lines("ib_a100_2node") if "Channel" not in l]
    assert classify_transport(only_init, rules)["transport"] == "unknown"
    socket_init = [l for l in lines("socket_fallback_2node") if "Channel" not in l]
    assert classify_transport(socket_init, rules)["transport"] == "socket"


def test_p2p_without_nvlink_graph_and_shm(rules):
    p2p = [l for l in lines("nvlink_a100_1node") if "type NVL" not in l]
    assert classify_transport(p2p, rules)["transport"] == "p2p"
    shm = ["h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"]
    assert classify_transport(shm, rules)["transport"] == "shm"
    assert classify_transport([], rules)["transport"] == "unknown"


def test_evidence_lines_keep_what_decides(rules):
    kept = evidence_lines(lines("ib_gdrdma_h100_2node"), rules)
    assert all("Bootstrap" not in l for l in kept)
    assert classify_transport(kept, rules)["transport"] == "infiniband"


def test_judge_passes_healthy_ib_a100():
    sku = load_catalog().get("Standard_ND96asr_v4")
    v = judge(gpu_result(185.0), sku, "ddp", dist(), logs("ib_a100_2node"))
    assert v.passed, v.failures
    assert v.transport == "infiniband"
    assert v.threshold_gbs == pytest.approx(188 * 0.8)
    assert "PASSED" in v.summary() and "185.00 GB/s" in v.summary()


def test_negative_control_socket_fails_judge():
    sku = load_catalog().get("Standard_ND96asr_v4")
    v = judge(gpu_result(185.0), sku, "ddp", dist(), logs("socket_fallback_2node"))
    assert not v.passed
    [failure] = v.failures
    assert failure.name == "transport" and "socket" in failure.detail and "NCCL_IB_DISABLE" in failure.detail


def test_gdrdma_is_reported():
    sku = load_catalog().get("Standard_ND96isr_H100_v5")
    v = judge(gpu_result(420.0), sku, "ddp", dist(), logs("ib_gdrdma_h100_2node"))
    assert v.passed, v.failures
    assert "GPUDirect RDMA" in next(j.detail for j in v.judgements if j.name == "transport")


@pytest.mark.parametrize("size, nodes, busbw, fraction, passed, threshold", [
    ("Standard_ND96asr_v4", 2, 150.0, 0.8, False, 150.4),   # 188 x 0.8
    ("Standard_ND96asr_v4", 2, 151.0, 0.8, True, 150.4),
    ("Standard_ND96amsr_A100_v4", 2, 100.0, 0.5, True, 94.0),
    ("Standard_ND96isr_H100_v5", 2, 359.0, 0.8, False, 360.0),  # 450 x 0.8
    ("Standard_ND96isr_H100_v5", 2, 361.0, 0.8, True, 360.0),
    ("Standard_ND40rs_v2", 2, 13.1, 0.8, True, 13.04),         # 16.3 x 0.8
    ("Standard_ND40rs_v2", 2, 13.0, 0.8, False, 13.04),
    ("Standard_ND96asr_v4", 1, 200.0, 0.9, False, 205.2),     # single node: 228 x 0.9
    ("Standard_ND96isr_H100_v5", 1, 420.0, 0.9, True, 414.0),  # single node: 460 x 0.9
])
def test_busbw_thresholds_per_size(size, nodes, busbw, fraction, passed, threshold):
    sku = load_catalog().get(size)
    case = "ib_a100_2node" if nodes > 1 else "nvlink_a100_1node"
    v = judge(gpu_result(busbw, world=8 * nodes), sku, "ddp", dist(nodes, fraction), logs(case))
    assert v.threshold_gbs == pytest.approx(threshold)
    assert v.passed is passed, v.judgements


def test_h100_below_broken_line_is_said():
    sku = load_catalog().get("Standard_ND96isr_H100_v5")
    v = judge(gpu_result(250.0), sku, "ddp", dist(), logs("ib_gdrdma_h100_2node"))
    assert not v.passed and "broken" in v.failures[0].detail


def test_no_healthy_figure_is_skipped_with_reason():
    sku = load_catalog().get("Standard_ND96isr_H200_v5")  # the catalog has only a single-node figure
    v = judge(gpu_result(400.0), sku, "ddp", dist(), logs("ib_gdrdma_h100_2node"))
    bw = next(j for j in v.judgements if j.name == "busbw")
    assert bw.outcome == "skipped" and "no multi-node healthy figure" in bw.detail
    assert v.passed


def test_failed_script_check_fails_verdict():
    sku = load_catalog().get("Standard_ND96asr_v4")
    v = judge(gpu_result(185.0, checks_ok=False), sku, "ddp", dist(), logs("ib_a100_2node"))
    assert not v.passed and [j.name for j in v.failures] == ["check.replicas_identical"]


def test_no_result_fails():
    v = judge(None, None, "ddp", dist())
    assert not v.passed and "no smoke result" in v.failures[0].detail


def cpu_result(**node) -> dict:
    return {"device": "cpu", "backend": "gloo", "world": {"world_size": 4},
            "node": {"gpu_device_files": [], "emulated": False, **node},
            "checks": [{"name": "world_size", "ok": True, "detail": ""}],
            "bandwidth": {"peak_busbw_gbs": 0.3, "peak_bytes": 1 << 20},
            "nccl": {"transport": "gloo-tcp", "why": "gloo"}}


def test_emulated_cpu_result_skips_gpu_ib_and_bandwidth_with_reasons():
    sku = load_catalog().get("Standard_ND96asr_v4")
    v = judge(cpu_result(emulated=True), sku, "ddp", dist())
    assert v.passed and v.transport == "gloo-tcp" and v.peak_busbw_gbs == 0.3
    outcomes = {j.name: (j.outcome, j.detail) for j in v.judgements}
    assert outcomes["device"][0] == "skipped" and "the local emulator ran the job on this machine's cpu" in outcomes["device"][1]
    assert outcomes["transport"][0] == "skipped" and "InfiniBand cannot be judged" in outcomes["transport"][1]
    assert outcomes["busbw"][0] == "skipped" and "0.300 GB/s" in outcomes["busbw"][1]


def test_cpu_run_on_a_gpu_size_fails_and_says_why():
    sku = load_catalog().get("Standard_ND96asr_v4")
    cpu_build = judge(cpu_result(gpu_device_files=["nvidia0", "nvidia1"]), sku, "ddp", dist())
    assert not cpu_build.passed and [j.name for j in cpu_build.failures] == ["device"]
    detail = cpu_build.failures[0].detail
    assert "8 x A100 40GB per node but the smoke ran with gloo on cpu" in detail
    assert "2 GPU device files (nvidia0, nvidia1)" in detail and "CPU-only build" in detail
    no_driver = judge(cpu_result(), sku, "ddp", dist())
    assert not no_driver.passed and "no GPU device file was visible" in no_driver.failures[0].detail


def test_cpu_run_on_a_cpu_size_is_not_a_device_failure():
    v = judge(cpu_result(), load_catalog().get("Standard_HB120rs_v3"), "ddp", dist())
    assert v.passed and {j.name: j.outcome for j in v.judgements}["device"] == "skipped"


def test_a_node_missing_a_gpu_fails():
    sku = load_catalog().get("Standard_ND96asr_v4")
    ranks = [{"rank": r, "host": f"node{r // 8}", "gpus": 7 if r >= 8 else 8} for r in range(16)]
    result = dict(gpu_result(185.0), world={"world_size": 16, "ranks": ranks})
    v = judge(result, sku, "ddp", dist(), logs("ib_a100_2node"))
    assert not v.passed and [j.name for j in v.failures] == ["device"]
    assert "node1 sees 7" in v.failures[0].detail
    whole = dict(result, world={"world_size": 16, "ranks": [dict(r, gpus=8) for r in ranks]})
    assert judge(whole, sku, "ddp", dist(), logs("ib_a100_2node")).passed


def test_socket_expected_on_a_size_without_infiniband():
    sku = load_catalog().get("Standard_NC24s_v3")
    v = judge(gpu_result(5.0), sku, "ddp", dist(), logs("socket_fallback_2node"))
    assert v.passed and v.transport == "socket"


def test_a_job_that_did_not_complete_fails_even_with_a_passing_result():
    sku = load_catalog().get("Standard_ND96asr_v4")
    v = judge(gpu_result(185.0), sku, "ddp", dist(), logs("ib_a100_2node"), job_name="j1", job_status="Failed")
    assert not v.passed and v.failures[0].name == "job" and "ended Failed" in v.failures[0].detail
    ok = judge(gpu_result(185.0), sku, "ddp", dist(), logs("ib_a100_2node"), job_name="j1", job_status="Completed")
    assert ok.passed


A100 = "Standard_ND96asr_v4"


def framework_dist(framework: str, kind: str = "pytorch") -> Distribution:
    return Distribution(cluster="c", environment="e", type=kind, framework=framework, instance_count=2,
                        process_count_per_instance=8)


def _framework_result(name: str, world: int, **seen) -> dict:
    result = gpu_result(185.0)
    result.update({"kind": "ddp-smoke", "framework": {"name": name, "world_size": world, "version": "1.0", **seen}})
    return result


def test_a_framework_seeing_another_world_fails_with_both_numbers():
    sku, d = load_catalog().get(A100), framework_dist("lightning")
    v = judge(_framework_result("lightning", 8), sku, "ddp", d, logs("ib_a100_2node"))
    assert not v.passed and [f.name for f in v.failures] == ["framework"]
    assert v.failures[0].detail == "lightning sees world size 8 but the stack describes 2 nodes x 8 processes = 16"
    agreed = judge(_framework_result("lightning", 16), sku, "ddp", d, logs("ib_a100_2node"))
    assert agreed.passed and "lightning 1.0 sees world size 16 = 2 nodes x 8 processes" in \
        next(j.detail for j in agreed.judgements if j.name == "framework")


def test_a_process_group_that_never_started_is_not_said_to_have_started():
    """A smoke whose torch.distributed init failed (GLOO_SOCKET_IFNAME naming a NIC the node lacks) printed
    `fail check.process_group` and then `pass framework: plain torch.distributed (DDP) initialised the process
    group`."""
    sku = load_catalog().get(A100)
    result = _framework_result("ddp", 0)
    result["checks"] = [{"name": "process_group", "ok": False,
                         "detail": "torch.distributed: RuntimeError: Unable to find address for: eth9"}]
    v = judge(result, sku, "ddp", dist(), logs("ib_a100_2node"))
    framework = next(j for j in v.judgements if j.name == "framework")
    assert framework.outcome == "fail" and "could not initialise the process group" in framework.detail
    started = judge(_framework_result("ddp", 16), sku, "ddp", dist(), logs("ib_a100_2node"))
    assert next(j for j in started.judgements if j.name == "framework").outcome == "pass"


def test_the_framework_must_be_the_distributions_and_present():
    sku, d = load_catalog().get(A100), framework_dist("deepspeed", "mpi")
    other = judge(_framework_result("ddp", 16), sku, "ds", d, logs("ib_a100_2node"))
    assert [f.name for f in other.failures] == ["framework"] and "'deepspeed'" in other.failures[0].detail
    # A framework that could not be imported is never PASSED: the verdict is INCOMPLETE (not a failure of what ran)
    missing = judge(_framework_result("deepspeed", 0, missing="deepspeed is not importable here"), sku, "ds", d,
                    logs("ib_a100_2node"))
    assert not missing.passed and not missing.failures and missing.incomplete == "deepspeed is not importable here"
    assert missing.summary().startswith("smoke.ds: INCOMPLETE")
    horovod = framework_dist("horovod", "mpi")
    skipped = judge(_framework_result("horovod", 0, missing="horovod is not importable here"), sku, "h", horovod,
                    logs("ib_a100_2node"))
    assert not skipped.passed and skipped.incomplete
    assert any(j.name == "framework" and j.outcome == "skipped" for j in skipped.judgements)
    # with a check that failed as well, it is FAILED (the failure first), the missing framework said beside it
    broken = _framework_result("deepspeed", 0, missing="deepspeed is not importable here")
    broken["checks"].append({"name": "world_size", "ok": False, "detail": "WORLD_SIZE 8 != 16"})
    assert judge(broken, sku, "ds", d, logs("ib_a100_2node")).summary().startswith("smoke.ds: FAILED")


def test_a_job_its_preflight_stopped_is_incomplete_with_every_check_skipped():
    """The job's preflight found deepspeed missing and ended the job (Failed, exit code 1) before any rank: nothing
    that was to be tested ran, so nothing failed; the job's end is said, not held against it."""
    sku, d = load_catalog().get(A100), framework_dist("deepspeed", "mpi")
    missing = "deepspeed is not importable here (No module named 'deepspeed' on the import path of /usr/bin/python3)"
    result = {"kind": "preflight", "version": 1, "missing": missing, "passed": False, "node": {"emulated": True},
              "checks": [{"name": "preflight", "ok": None, "detail": "stopped before any rank started: " + missing}]}
    v = judge(result, sku, "ds", d, job_name="job-1", job_status="Failed")
    assert not v.passed and not v.failures and v.incomplete == missing and v.summary().startswith("smoke.ds: INCOMPLETE")
    got = {j.name: (j.outcome, j.detail) for j in v.judgements}
    assert list(got) == ["job", "check.preflight", "device", "transport", "busbw"]
    assert got["job"] == ("skipped", "job job-1 ended Failed at its preflight, before any rank started")
    assert all(o == "skipped" for o, _ in got.values()) and missing in got["busbw"][1]


def test_ib_disabled_on_an_infiniband_size_still_fails_with_a_framework_probe():
    """NCCL_IB_DISABLE=1 (recorded NCCL logs of such a run) fails the transport whatever framework ran."""
    sku, d = load_catalog().get(A100), framework_dist("deepspeed")
    v = judge(_framework_result("deepspeed", 16), sku, "ds", d, logs("socket_fallback_2node"))
    assert [f.name for f in v.failures] == ["transport"] and "NCCL_IB_DISABLE" in v.failures[0].detail
