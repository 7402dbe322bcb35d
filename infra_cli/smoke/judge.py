"""The judge: a smoke result (+ NCCL debug logs) and the cluster size's catalog row -> a verdict.

Pure: no I/O beyond reading the rules file once. A job passes only if every check of the script held,
it ran on the size's GPUs (all of them) where the size has GPUs, the transport is InfiniBand where the size gives NCCL InfiniBand across nodes, and the all_reduce bus
bandwidth reaches the size's healthy figure x the stack's smoke.busbw_fraction. What cannot be judged
(CPU runs, sizes without a healthy figure) is skipped with the reason, never silently passed. A job whose
framework could not be imported where it ran (the script's `missing`) is INCOMPLETE, never passed; so is one
whose preflight found the job's python without a module the smoke imports (or its launcher) and ended it before
any rank started (a result of kind `preflight`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import says
from infra_cli.knowledge.nccl_transport import transport_rules
from infra_cli.knowledge.skus import Sku
from infra_cli.smoke.diagnose import Finding
from infra_cli.smoke.spec import SMOKED_FRAMEWORKS, processes_per_node
from infra_cli.smoke.transport import UNKNOWN, classify_transport
from infra_cli.stack.model import Distribution

Outcome = Literal["pass", "fail", "skipped"]


@dataclass(frozen=True)
class Judgement:
    """One check of a smoke job (ranks, DDP, busbw, transport, ...): passed, failed or skipped, and why."""

    name: str
    outcome: Outcome
    detail: str

    def to_json(self) -> dict:
        return {"name": self.name, "outcome": self.outcome, "detail": str(self.detail)}


@dataclass(frozen=True)
class SmokeVerdict:
    distribution: str
    passed: bool
    judgements: tuple[Judgement, ...]
    transport: str
    peak_busbw_gbs: float | None = None
    threshold_gbs: float | None = None
    job_name: str | None = None
    result: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    findings: tuple[Finding, ...] = ()  # why it failed, read from the job's logs (diagnose.py)
    # Not PASSED, not FAILED: nothing that ran failed, but the framework could not be imported where the job ran,
    # so what it was meant to prove is unproven (the script's own words; the smoke stays pending)
    incomplete: str | None = None
    # where the job's logs and outputs were kept for a smoke that did not pass (smoke/run.py keep_logs)
    logs_dir: str | None = field(default=None, compare=False)

    @property
    def failures(self) -> list[Judgement]:
        return [j for j in self.judgements if j.outcome == "fail"]

    def summary(self) -> str:
        busbw = "n/a" if self.peak_busbw_gbs is None else f"{self.peak_busbw_gbs:.2f} GB/s"
        need = "" if self.threshold_gbs is None else f" (needs >= {self.threshold_gbs:.1f})"
        word = "PASSED" if self.passed else "INCOMPLETE" if self.incomplete else "FAILED"
        return f"smoke.{self.distribution}: {word}  transport={self.transport}  busbw={busbw}{need}"

    def to_json(self) -> dict:
        return {
            "distribution": self.distribution,
            "passed": self.passed,
            "incomplete": self.incomplete,
            "transport": self.transport,
            "peak_busbw_gbs": self.peak_busbw_gbs,
            "threshold_gbs": self.threshold_gbs,
            "job_name": self.job_name,
            "judgements": [j.to_json() for j in self.judgements],
            "findings": [f.to_json() for f in self.findings],
            "logs_dir": self.logs_dir,
        }


def _script_checks(result: dict[str, Any]) -> list[Judgement]:
    outcome: dict[bool | None, Outcome] = {True: "pass", False: "fail", None: "skipped"}
    out = [Judgement(f"check.{c['name']}", outcome[c["ok"]], c.get("detail", "")) for c in result.get("checks", [])]
    if not out:
        out.append(Judgement("check.ran", "fail", "the result lists no checks: the smoke script did not get far"))
    return out


def _framework_judgement(result: dict[str, Any], sku: Sku | None, distribution: Distribution) -> Judgement | None:
    """The world the training framework itself saw (Lightning, Transformers, DeepSpeed, Horovod) against the
    stack's nodes x processes per node, both numbers said. None for results without a framework probe (TF)."""
    seen = result.get("framework")
    if not isinstance(seen, dict) or result.get("kind") != "ddp-smoke":
        return None
    wanted = distribution.framework if distribution.framework in SMOKED_FRAMEWORKS else "ddp"
    name = seen.get("name")
    if name != wanted:
        return Judgement("framework", "fail", says(f"the smoke initialised {name!r} but the distribution's framework "
                                                   f"is {wanted!r}: re-render the smoke job (infra render) or rerun ",
                                                   NextStep(("infra", "smoke"))))
    if name == "ddp":
        # what stops the script before (or at) the process group: it never started
        stopped = next((c["name"] for c in result.get("checks", []) if c.get("ok") is False and
                        c.get("name") in ("launch", "torch", "process_group")), None)
        if stopped:
            return Judgement("framework", "fail", "plain torch.distributed (DDP) could not initialise the process "
                             f"group (check.{stopped} above)")
        return Judgement("framework", "pass", "plain torch.distributed (DDP) initialised the process group")
    if seen.get("missing"):  # not a failure of what ran; the verdict is incomplete (judge)
        return Judgement("framework", "skipped", f"not run: {seen['missing']}")
    if seen.get("error"):
        return Judgement("framework", "fail", f"{name} failed to initialise: {seen['error']}")
    expected = distribution.instance_count * processes_per_node(distribution, sku)
    world = seen.get("world_size")
    if world != expected:
        return Judgement("framework", "fail", f"{name} sees world size {world} but the stack describes "
                         f"{distribution.instance_count} nodes x {expected // distribution.instance_count} "
                         f"processes = {expected}")
    return Judgement("framework", "pass", f"{name} {seen.get('version', '')} sees world size {world} = "
                     f"{distribution.instance_count} nodes x {expected // distribution.instance_count} processes")


def _device_judgement(result: dict[str, Any], sku: Sku | None) -> Judgement:
    """A GPU size must run the smoke on its GPUs, every one of them: a CPU fallback would pass every other
    check while training at a fraction of the speed paid for."""
    device, backend = result.get("device", "unknown"), result.get("backend", "no")
    if sku is None:
        return Judgement("device", "skipped", f"ran on {device}: the cluster's size is not in the catalog")
    if sku.gpus == 0:
        return Judgement("device", "skipped", f"ran on {device}: {sku.name} has no GPUs")
    gpus = f"{sku.gpus} x {sku.gpu_model}" if sku.gpu_model else f"{sku.gpus} GPUs"
    if device == "cuda":
        ranks = (result.get("world") or {}).get("ranks") or []
        short = sorted({(r.get("host"), r["gpus"]) for r in ranks if r.get("gpus") is not None and r["gpus"] < sku.gpus})
        if short:
            seen = ", ".join(f"{host} sees {n}" for host, n in short)
            return Judgement("device", "fail", f"{sku.name} has {gpus} per node but {seen}: a GPU is missing or "
                             "hidden (CUDA_VISIBLE_DEVICES?); run the node health checks or replace the node")
        return Judgement("device", "pass", f"ran with {backend} on the GPUs of {sku.name} ({gpus} per node)")
    node = result.get("node") or {}
    if node.get("emulated"):
        return Judgement("device", "skipped", f"the local emulator ran the job on this machine's {device}: "
                         f"{sku.name}'s {gpus} per node are not here to use")
    if device not in ("cpu", "cuda"):
        skipped = "; ".join(c.get("detail", "") for c in result.get("checks", []) if c.get("ok") is None)
        # the framework was not there to reach them: the smoke is incomplete, not the GPUs at fault
        return Judgement("device", "skipped" if result.get("missing") else "fail",
                         f"{sku.name} has {gpus} per node but the smoke never reached them"
                         + (f": {skipped}" if skipped else ": no framework ran"))
    files = node.get("gpu_device_files") or []
    seen = (f"the driver shows {len(files)} GPU device files ({', '.join(files[:4])}{', …' if len(files) > 4 else ''}), "
            "so the image cannot use them: a CPU-only build of the framework, or CUDA newer than the node's driver"
            if files else "no GPU device file was visible (is the driver up on the node?)")
    return Judgement("device", "fail", f"{sku.name} has {gpus} per node but the smoke ran with {backend} on "
                     f"{device}: {seen}")


def _transport_judgement(report: dict[str, Any], result: dict[str, Any], sku: Sku | None,
                         distribution: Distribution) -> Judgement:
    transport = report.get("transport", UNKNOWN)
    multi_node = distribution.instance_count > 1
    if result.get("missing") and not report:   # the smoke stopped once the framework was found missing
        return Judgement("transport", "skipped", f"not measured: {result['missing']}")
    if result.get("backend") != "nccl":
        return Judgement("transport", "skipped",
                         f"ran with {result.get('backend', 'no')} backend on {result.get('device', 'an unknown device')}: "
                         "NCCL was not used, so InfiniBand cannot be judged")
    if sku is None:
        return Judgement("transport", "skipped", f"transport {transport}: the cluster's size is not in the catalog")
    if not multi_node:
        return Judgement("transport", "skipped",
                         f"transport {transport} ({report.get('why', '')}): one node, so the network is not exercised")
    if not (sku.infiniband_eligible and sku.nccl_over_ib):
        return Judgement("transport", "skipped",
                         f"transport {transport}: {sku.name} gives NCCL no InfiniBand, so none is expected")
    if transport == "infiniband":
        gdr = ", GPUDirect RDMA" if report.get("gdrdma") else ""
        return Judgement("transport", "pass", f"InfiniBand{gdr}: {report.get('why', '')}")
    evidence = "; ".join(report.get("evidence", [])[:3])
    hint = " (is NCCL_IB_DISABLE or NCCL_NET=Socket set, or NCCL_DEBUG lowered below INFO?)"
    return Judgement("transport", "fail",
                     f"{sku.name} x {distribution.instance_count} nodes must use InfiniBand but NCCL used "
                     f"{transport}: {report.get('why', '')}{hint}" + (f"; evidence: {evidence}" if evidence else ""))


def _bandwidth_judgement(result: dict[str, Any], sku: Sku | None, distribution: Distribution
                         ) -> tuple[Judgement, float | None]:
    bw = result.get("bandwidth") or {}
    peak = bw.get("peak_busbw_gbs")
    if peak is None:
        why = f"not measured: {result['missing']}" if result.get("missing") else "the result has no bandwidth sweep"
        return Judgement("busbw", "skipped", why), None
    measured = f"peak all_reduce busbw {peak:.3f} GB/s at {bw.get('peak_bytes')} bytes"
    if result.get("device") != "cuda":
        return Judgement("busbw", "skipped", f"{measured} on {result.get('device')}: GPU figures do not apply"), None
    if int(result.get("world", {}).get("world_size", 0)) < 2:
        # its peak is 0 at whichever size came first: shown, it reads as a broken network
        return Judgement("busbw", "skipped", "not measured: one rank moves no data between ranks "
                         "(busbw = algbw x 2(n-1)/n is 0 for n = 1)"), None
    if sku is None:
        return Judgement("busbw", "skipped", f"{measured}: the cluster's size is not in the catalog"), None
    multi_node = distribution.instance_count > 1
    healthy = sku.healthy_busbw_gbs.multi_node if multi_node else sku.healthy_busbw_gbs.single_node
    scope = "multi-node" if multi_node else "single-node"
    if healthy is None:
        return Judgement("busbw", "skipped", f"{measured}: the catalog has no {scope} healthy figure for {sku.name}"), None
    fraction = distribution.smoke.busbw_fraction
    threshold = healthy * fraction
    detail = f"{measured} vs {scope} healthy {healthy:g} GB/s x {fraction:g} = {threshold:.1f} GB/s"
    floor = sku.healthy_busbw_gbs.fail_below
    if floor is not None and peak < floor:
        detail += f"; below {floor:g} GB/s, which the catalog calls broken"
    return Judgement("busbw", "pass" if peak >= threshold else "fail", detail), threshold


def _stopped_by_preflight(result: dict[str, Any], distribution_name: str, job_name: str | None,
                          job_status: str | None) -> SmokeVerdict:
    """The job's preflight (templates/smoke/preflight.py.j2) ended it, with exit code 1, before any launcher or
    rank started: what it names is missing where the job ran. Nothing that was to be tested ran, so nothing
    failed: INCOMPLETE, with every check skipped for that reason."""
    missing = str(result.get("missing") or "the job's preflight found what the smoke needs missing")
    not_run = f"not run: the job's preflight stopped it before any rank started: {missing}"
    ended = [] if job_status is None else [Judgement(
        "job", "skipped", f"job {job_name or ''} ended {job_status} at its preflight, before any rank started"
        .replace("  ", " "))]
    judgements = [*ended, Judgement("check.preflight", "skipped", missing),
                  *(Judgement(name, "skipped", not_run) for name in ("device", "transport", "busbw"))]
    return SmokeVerdict(distribution_name, False, tuple(judgements), UNKNOWN, job_name=job_name, result=result,
                        incomplete=missing)


def judge(result: dict[str, Any] | None, sku: Sku | None, distribution_name: str, distribution: Distribution,
          nccl_logs: Iterable[str] = (), *, job_name: str | None = None, job_status: str | None = None,
          rules: dict[str, Any] | None = None) -> SmokeVerdict:
    """Judge one smoke job. `nccl_logs`: the text of every rank's NCCL debug file (may be empty);
    `job_status`: how the job ended, when known (anything but Completed fails the verdict)."""
    ended = [] if job_status is None else [Judgement(
        "job", "pass" if job_status == "Completed" else "fail", f"job {job_name or ''} ended {job_status}".replace("  ", " "))]
    if result is None:
        no_result = Judgement("result", "fail", "the job wrote no smoke result (its logs say why: `logs:` below)")
        return SmokeVerdict(distribution_name, False, (*ended, no_result), UNKNOWN, job_name=job_name)
    if result.get("kind") == "preflight":
        return _stopped_by_preflight(result, distribution_name, job_name, job_status)
    lines = [line for text in nccl_logs for line in text.splitlines()]
    report = classify_transport(lines, rules or transport_rules().plain) if lines else (result.get("nccl") or {})
    judgements = ended + _script_checks(result)
    framework = _framework_judgement(result, sku, distribution)
    if framework is not None:
        judgements.append(framework)
    judgements.append(_device_judgement(result, sku))
    judgements.append(_transport_judgement(report, result, sku, distribution))
    bandwidth, threshold = _bandwidth_judgement(result, sku, distribution)
    judgements.append(bandwidth)
    failed = any(j.outcome == "fail" for j in judgements)
    missing = result.get("missing") or (result.get("framework") or {}).get("missing")
    return SmokeVerdict(distribution_name, not failed and not missing, tuple(judgements),
                        report.get("transport", UNKNOWN), (result.get("bandwidth") or {}).get("peak_busbw_gbs"),
                        threshold, job_name, result, incomplete=str(missing) if missing and not failed else None)
