"""Bandwidth as a picture: the terminal bar chart and the self-contained report.html of `infra smoke --report`."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from xml.etree import ElementTree

from system_tools import require

from infra_cli.smoke.diagnose import Finding
from infra_cli.smoke.judge import Judgement, SmokeVerdict
from infra_cli.commands.views.smoke_report import (human_bytes, html_report, svg_chart, sweep, terminal_chart,
                                                  write_report)

SVG = "{http://www.w3.org/2000/svg}"


def _verdict(name="ddp", threshold=150.0, passed=True, sizes=((1 << 20, 12.0), (1 << 24, 95.5), (1 << 28, 188.0)),
             findings=()) -> SmokeVerdict:
    rows = [{"bytes": b, "algbw_gbs": bw / 1.75, "busbw_gbs": bw} for b, bw in sizes]
    return SmokeVerdict(distribution=name, passed=passed, transport="NET/IB",
                        judgements=(Judgement("busbw", "pass" if passed else "fail", "peak 188 GB/s"),),
                        peak_busbw_gbs=max(bw for _, bw in sizes), threshold_gbs=threshold, job_name="job-1",
                        result={"bandwidth": {"sizes": rows + [{"bytes": "junk"}]}}, findings=findings)


def test_sweep_reads_the_job_result_and_skips_malformed_rows():
    assert sweep(_verdict()) == [(1 << 20, 12.0), (1 << 24, 95.5), (1 << 28, 188.0)]
    assert sweep(SmokeVerdict("x", False, (), "unknown")) == []
    assert human_bytes(1 << 20) == "1 MiB" and human_bytes(1536) == "1.5 KiB" and human_bytes(7) == "7 B"


def test_terminal_chart_bars_grow_with_busbw_and_mark_the_pass_line():
    lines = terminal_chart(_verdict(), width=40).splitlines()
    assert "pass line | = 150.0 GB/s" in lines[0]
    bars = [line.count("█") for line in lines[1:]]
    assert bars == sorted(bars) and bars[-1] + 1 == 40 and bars[0] < 5   # the peak fills the row, one cell is the mark
    assert all(line.split("GB/s")[0].count("|") == 1 for line in lines[1:])
    assert lines[2].index("|") == lines[3].index("|")  # the same column on every row
    assert "no bandwidth sweep" in terminal_chart(SmokeVerdict("x", False, (), "unknown"))


def test_svg_chart_is_well_formed_with_one_point_per_size_and_the_pass_line():
    root = ElementTree.fromstring(svg_chart(_verdict()))
    polyline = root.find(f"{SVG}polyline")
    points = [tuple(map(float, p.split(","))) for p in polyline.get("points").split()]
    assert len(points) == 3 and [x for x, _ in points] == sorted(x for x, _ in points)
    assert points[0][1] > points[1][1] > points[2][1]   # higher busbw is higher on the page (smaller y)
    line = root.find(f"{SVG}line[@class='pass-line']")
    assert line is not None and points[2][1] < float(line.get("y1")) < points[1][1]
    assert root.find(f"{SVG}line") is not None
    without = ElementTree.fromstring(svg_chart(_verdict(threshold=None)))
    assert without.find(f"{SVG}line[@class='pass-line']") is None


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.external, self.scripts, self.svgs = [], 0, 0

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        self.svgs += tag == "svg"
        self.external += [v for k, v in attrs if k in ("src", "href") and v]


def test_report_is_self_contained_and_escapes_what_the_logs_say(tmp_path):
    hostile = Finding(cause="<script>alert(1)</script>", fix="a & b", lines=("<img src=x onerror=alert(1)>",),
                      logs=("user_logs/std_log_process_0.txt",))
    page = html_report([_verdict(), _verdict("tf<b>", passed=False, findings=(hostile,))], "ib-a100")
    parser = _Links()
    parser.feed(page)
    assert parser.external == [] and parser.scripts == 0 and parser.svgs == 2
    assert "<script>alert" not in page and "&lt;script&gt;" in page and "<img" not in page
    assert "1 of 2 smoke job(s) passed" in page and "Content-Security-Policy" in page
    written = write_report(tmp_path / "r", [_verdict()], "ib-a100")
    assert written.name == "report.html" and (tmp_path / "r" / "smoke.json").read_text().count('"busbw_gbs"') == 3


def test_report_renders_in_a_real_headless_browser(tmp_path):
    require("chromium")
    chromium = shutil.which("chromium")
    page = write_report(tmp_path / "r", [_verdict(), _verdict("tf", passed=False)], "ib-a100")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert len(re.findall(r"<svg[^>]*busbw-chart", dom.stdout)) == 2 and "<polyline" in dom.stdout
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Refused to" in line]
    assert console == [], console
    shot = tmp_path / "report.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri()],
                   capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failed_smokes_logs_are_named_on_the_page_and_in_the_progress_lines():
    """"see the job's logs" said nowhere where they were: the folder they were kept in is on the page and in
    the lines printed after the verdict."""
    from dataclasses import replace

    from infra_cli.commands.views.smoke_progress import event_lines
    from infra_cli.smoke.events import Judged

    failed = replace(_verdict(passed=False), job_name="job-1", logs_dir="/tmp/infra-smoke-logs-job-1-x<y")
    page = html_report([failed], "demo")
    assert "Logs: <code>/tmp/infra-smoke-logs-job-1-x&lt;y</code> (job job-1" in page and "user_logs/" in page
    lines = event_lines(Judged(failed))
    assert lines[-1].startswith("  logs:   /tmp/infra-smoke-logs-job-1-x<y (job job-1's user_logs/ and outputs/")
    assert "Logs:" not in html_report([_verdict()], "demo")   # a passed smoke keeps no logs
