"""A CheckResult as the human verdict: one line per requirement, then its evidence (path, link chain, layer)."""

from __future__ import annotations

from infra_cli.image.check import CheckResult
from infra_cli.image.merged_filesystem import State


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _evidence_line(item: dict) -> str:
    where = " -> ".join(item["via"]) if item.get("via") else item["path"]
    layer = f" (layer {item['layer']})" if item.get("layer") is not None else ""
    extra = ""
    if "on_library_path" in item:
        extra = "" if item["on_library_path"] else " [not on LD_LIBRARY_PATH]"
    return f"{where}{layer}{extra}"


def format_result(result: CheckResult) -> str:
    head = f"{result.reference}"
    if result.digest:
        head += f" ({result.digest[:19]}..., {result.platform})"
    lines = [head]
    width = max((len(r.requirement) for r in result.requirements), default=0)
    for r in result.requirements:
        lines.append(f"  {'PASS' if r.met else 'FAIL'}  {r.requirement:<{width}}  {r.reason}")
        shown = set()
        for item in r.evidence:        # the best piece of evidence per rule; --json has them all
            if item.get("rule") not in shown:
                shown.add(item.get("rule"))
                lines.append(f"          {item.get('rule')}: {_evidence_line(item)}")
    reported = {r.variant for r in result.requirements if r.variant}
    for f in result.findings:
        if f.state is State.FOUND and f.variant not in reported:
            lines.append(f"  note  also found {f.variant}{' ' + f.version if f.version else ''} ({f.profile})")
        if f.state is State.FOUND:
            for opt in f.optional:
                shown = ", ".join(_evidence_line(e) for e in opt.evidence) or "none"
                lines.append(f"  info  {f.variant}: {opt.rule}: {shown}")
    tail = (f"read {result.layers_read} of {result.layers_total} layers, {_mb(result.bytes_read)} of "
            f"{_mb(result.bytes_total)} in {result.seconds:.2f} s")
    if result.stopped_early:
        tail += " (stopped early: the layers below cannot change the verdict)"
    lines.append(tail)
    return "\n".join(lines)
