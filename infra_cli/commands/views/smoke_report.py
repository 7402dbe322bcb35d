"""Bandwidth as a picture: the all_reduce sweep of each smoke job as a terminal bar chart and as a
self-contained HTML report (inline SVG, no scripts, no external resources) for `infra smoke --report DIR`.

Pure functions of the verdicts (smoke/judge.py), so a saved verdict renders the same picture later. The
pass line is the judge's threshold (the size's healthy busbw x smoke.busbw_fraction, from
validators/skus.yaml); a sweep judged without one (CPU, one rank, a size outside the catalog) has none.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Iterable

from infra_cli.smoke.judge import SmokeVerdict

REPORT_FILE = "report.html"
VERDICTS_FILE = "smoke.json"
_BAR = "█"
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def human_bytes(n: int) -> str:
    for size, unit in _UNITS:
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def sweep(verdict: SmokeVerdict) -> list[tuple[int, float]]:
    """(message bytes, busbw GB/s) of the job's all_reduce sweep, smallest message first."""
    rows = ((verdict.result or {}).get("bandwidth") or {}).get("sizes") or []
    points = []
    for row in rows:
        try:
            size, busbw = int(row["bytes"]), float(row["busbw_gbs"])
        except (KeyError, TypeError, ValueError):
            continue
        if size > 0 and math.isfinite(busbw) and busbw >= 0:
            points.append((size, busbw))
    return sorted(points)


def terminal_chart(verdict: SmokeVerdict, width: int = 40) -> str:
    """Message size vs busbw as horizontal bars; `|` marks the pass line where the judge had one."""
    points = sweep(verdict)
    if not points:
        return f"smoke.{verdict.distribution}: no bandwidth sweep to chart"
    threshold = verdict.threshold_gbs
    top = max([b for _, b in points] + ([threshold] if threshold else [])) or 1.0
    mark = round(threshold / top * width) if threshold else None
    label = max(len(human_bytes(s)) for s, _ in points)
    lines = [f"smoke.{verdict.distribution}: all_reduce busbw by message size"
             + (f" (pass line | = {threshold:.1f} GB/s)" if threshold else "")]
    for size, busbw in points:
        cells = [_BAR if i < round(busbw / top * width) else " " for i in range(width)]
        if mark is not None:
            cells[min(mark, width - 1)] = "|"
        lines.append(f"  {human_bytes(size):>{label}} {''.join(cells)} {busbw:.3f} GB/s")
    return "\n".join(lines)


def svg_chart(verdict: SmokeVerdict, width: int = 640, height: int = 300) -> str:
    """Busbw (GB/s, linear) against message size (log2 axis) as an SVG element, the pass line dashed."""
    points = sweep(verdict)
    left, right, top_pad, bottom = 64, 40, 16, 40
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    title = f"smoke.{verdict.distribution}: all_reduce bus bandwidth"
    if not points:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="40">'
                f"<title>{escape(title)}</title><text x=\"0\" y=\"24\">no bandwidth sweep</text></svg>")
    threshold = verdict.threshold_gbs
    y_max = max([b for _, b in points] + ([threshold] if threshold else [])) * 1.1 or 1.0
    x_lo, x_hi = math.log2(points[0][0]), math.log2(points[-1][0])
    span = (x_hi - x_lo) or 1.0

    def x(size: int) -> float:
        return left + (math.log2(size) - x_lo) / span * plot_w

    def y(busbw: float) -> float:
        return top_pad + plot_h - busbw / y_max * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="busbw-chart" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}"><title>{escape(title)}</title>',
             f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>']
    for i in range(5):
        value = y_max * i / 4
        parts.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="11">{value:.2f}</text>')
    for size, _ in points:
        parts.append(f'<text x="{x(size):.1f}" y="{height - bottom + 16}" text-anchor="middle" '
                     f'font-size="10">{escape(human_bytes(size))}</text>')
    if threshold:
        parts.append(f'<line class="pass-line" x1="{left}" x2="{left + plot_w}" y1="{y(threshold):.1f}" '
                     f'y2="{y(threshold):.1f}" stroke="#c00" stroke-dasharray="6 4"/>'
                     f'<text x="{left + plot_w - 4}" y="{y(threshold) - 4:.1f}" text-anchor="end" font-size="11" '
                     f'fill="#c00">pass line {threshold:.1f} GB/s</text>')
    path = " ".join(f"{x(s):.1f},{y(b):.1f}" for s, b in points)
    parts.append(f'<polyline class="busbw" points="{path}" fill="none" stroke="#1f6feb" stroke-width="2"/>')
    parts += [f'<circle cx="{x(s):.1f}" cy="{y(b):.1f}" r="3" fill="#1f6feb"><title>{escape(human_bytes(s))}: '
              f"{b:.3f} GB/s</title></circle>" for s, b in points]
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">'
                 "message size</text>"
                 f'<text x="14" y="{top_pad + plot_h / 2:.0f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top_pad + plot_h / 2:.0f})">busbw GB/s</text></svg>')
    return "".join(parts)


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:60em}h2{margin-top:2em}
.passed{color:#116329}.failed{color:#c00}table{border-collapse:collapse}td,th{border:1px solid #ccc;
padding:.2em .6em;text-align:left;vertical-align:top}pre{white-space:pre-wrap;background:#f6f8fa;padding:.5em}"""


def html_report(verdicts: Iterable[SmokeVerdict], stack: str) -> str:
    """One self-contained page: per distribution the verdict, its judgements, findings and the chart."""
    verdicts = list(verdicts)
    passed = sum(v.passed for v in verdicts)
    body = [f"<h1>infra smoke: {escape(stack)}</h1>",
            f"<p>{passed} of {len(verdicts)} smoke job(s) passed.</p>"]
    for v in verdicts:
        word, css = ("PASSED", "passed") if v.passed else ("INCOMPLETE", "failed") if v.incomplete else ("FAILED", "failed")
        body.append(f'<section id="smoke-{escape(v.distribution)}"><h2>smoke.{escape(v.distribution)}: '
                    f'<span class="{css}">{word}</span></h2>')
        body.append(f"<p>transport {escape(v.transport)}"
                    + (f", job {escape(v.job_name)}" if v.job_name else "") + "</p>")
        body.append(svg_chart(v))
        rows = "".join(f"<tr><td>{escape(j.name)}</td><td>{escape(j.outcome)}</td><td>{escape(j.detail)}</td></tr>"
                       for j in v.judgements)
        body.append(f"<table><tr><th>check</th><th>outcome</th><th>detail</th></tr>{rows}</table>")
        if v.findings:
            items = "".join(f"<li><pre>{escape(chr(10).join(f.render()))}</pre></li>" for f in v.findings)
            body.append(f"<h3>{'What it lacked' if v.incomplete else 'Why it failed'}</h3><ul>{items}</ul>")
        if v.logs_dir:
            body.append(f"<p>Logs: <code>{escape(v.logs_dir)}</code> (job {escape(v.job_name or '')}'s user_logs/ "
                        "and outputs/, downloaded; on Azure also in the job's page in Azure ML studio)</p>")
        body.append("</section>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>infra smoke: {escape(stack)}</title><style>{_STYLE}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def write_report(directory: Path, verdicts: list[SmokeVerdict], stack: str) -> Path:
    """Write report.html and the verdicts' JSON (with each sweep) into directory; return the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    data = [{**v.to_json(), "sweep": [{"bytes": s, "busbw_gbs": b} for s, b in sweep(v)]} for v in verdicts]
    (directory / VERDICTS_FILE).write_text(json.dumps(data, indent=2) + "\n")
    page = directory / REPORT_FILE
    page.write_text(html_report(verdicts, stack))
    return page
