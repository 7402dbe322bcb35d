"""A CheckResult as the human verdict: one line per requirement, then its evidence (path, link chain, layer), and
under a requirement not met, what to do (`fix:` lines: the install command for the image's distribution, base
images that carry it, infra's Dockerfile template)."""

from __future__ import annotations

import json

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


FIX_INDENT = " " * 10


def _install_line(how: dict) -> str:
    return how["run"] + (f"  ({how['note']})" if how.get("note") else "")


def format_fix(fix: dict) -> list[str]:
    """The `fix:` lines under a FAIL (the same data as --json's `fix`)."""
    lines, more = [], FIX_INDENT + "     "
    if fix.get("install"):
        where = "install" if fix.get("install_family") == "any" else f"on {fix['distribution']}"
        note = f"  ({fix['install_note']})" if fix.get("install_note") else ""
        lines.append(f"{FIX_INDENT}fix: {where}: {fix['install']}{note}")
    elif fix.get("install_by_family"):
        seen = fix.get("distribution")
        why = ("the image's distribution is unknown (no os-release ID)" if not seen else
               f"{seen} is none of the distributions infra knows" if not fix.get("family") else
               f"infra knows no install command for {seen}")
        lines.append(f"{FIX_INDENT}fix: {why}; install with")
        lines.extend(f"{more}{how['name']}: {_install_line(how)}" for how in fix["install_by_family"].values())
    lead = "or " if lines else ""
    notes = fix.get("base_image_notes") or {}
    for i, image in enumerate(fix.get("base_images") or []):
        note = f"  ({notes[image]})" if notes.get(image) else ""
        head = f"{FIX_INDENT}fix: {lead}build " if i == 0 else f"{more}or "
        lines.append(f"{head}FROM {image}{note}")
    lead = "or " if lines else ""
    if fix.get("template"):
        parameters = fix.get("template_parameters") or {}
        shown = "".join(f", {k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in parameters.items())
        with_parameters = f", parameters: {{{shown[2:]}}}" if parameters else ""
        lines.append(f"{FIX_INDENT}fix: {lead}build infra's {fix['template']} template: environment "
                     f"build: {{template: {fix['template']}{with_parameters}}}")
    return lines


def format_result(result: CheckResult) -> str:
    head = f"{result.reference}"
    if result.digest:
        head += f" ({result.digest[:19]}..., {result.platform})"
    lines = [head]
    width = max((len(r.requirement) for r in result.requirements), default=0)
    for r in result.requirements:
        lines.append(f"  {'PASS' if r.met else 'FAIL'}  {r.requirement:<{width}}  {r.reason}")
        rules_shown = set()
        for item in r.evidence:        # the best piece of evidence per rule; --json has them all
            if item.get("rule") not in rules_shown:
                rules_shown.add(item.get("rule"))
                lines.append(f"          {item.get('rule')}: {_evidence_line(item)}")
        if not r.met and r.fix:
            lines.extend(format_fix(r.fix))
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
