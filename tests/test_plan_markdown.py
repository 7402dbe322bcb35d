"""`infra show PLANFILE --markdown` and `infra plan STACK --markdown` (issue 44): GitHub-flavoured Markdown for a pull
request comment or a job summary, rendered here by a Markdown library as GitHub renders it (tables on) and read
back: the stack and workspace, the counts, a table of each resource with its action and what changes (a field
forcing replacement marked), the cost before and after, errors, warnings and policy results, the smoke jobs pending,
the full text plan in <details>; no ANSI codes, secrets redacted, a plan without changes in one line, and nothing
from the stack becomes a link, an image or HTML."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from emulator_fixtures import WORKSPACE_YAML

SECRET = "tok-9f8e7d6c5b4a-Secret"
HEAD = f"stack: md\n{WORKSPACE_YAML}variables:\n  token: {{sensitive: true}}\n"
V1 = HEAD + """clusters:
  scale: {size: Standard_NC4as_T4_v3, max_instances: 2}
  resize: {size: Standard_NC4as_T4_v3, max_instances: 1}
  retire: {size: Standard_NC4as_T4_v3, max_instances: 1}
"""
V2 = HEAD + """clusters:
  scale: {size: Standard_NC4as_T4_v3, max_instances: 4}
  resize: {size: Standard_NC8as_T4_v3, max_instances: 1}
  fresh:
    size: Standard_NC4as_T4_v3
    max_instances: 1
    tags: {token: "${var.token}", note: "<img src=x onerror=alert(1)> | [click](https://evil.example/) **bold**"}
environments:
  pytorch: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  ddp: {cluster: fresh, environment: pytorch, type: pytorch, instance_count: 1, process_count_per_instance: 1}
"""


def infra(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, "INFRA_LOCAL_DIR": str(cwd / "state"),
                                            "INFRA_VAR_token": SECRET})


class Page(HTMLParser):
    """The rendered HTML, read back: tables as rows of cell texts, every tag seen, the text of each element."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def render(markdown: str) -> Page:
    return Page(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, Path]:
    project = tmp_path_factory.mktemp("md")
    (project / "stack.yaml").write_text(V1)
    done = infra("apply", "stack.yaml", "--local", "--auto-approve", "--no-smoke", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    (project / "stack.yaml").write_text(V2)
    (project / "policy").mkdir()
    (project / "policy" / "tags.rego").write_text('package main\n\nimport rego.v1\n\nwarn contains msg if {\n'
                                                  '\tsome rc in input.resource_changes\n\trc.type == "cluster"\n'
                                                  '\tnot rc.change.after.tags.owner\n'
                                                  '\tmsg := sprintf("%s has no owner tag", [rc.address])\n}\n')
    done = infra("plan", "stack.yaml", "--local", "--out", "p.plan", cwd=project)
    assert done.returncode == 0, done.stderr
    return project, project / "p.plan"


def test_show_markdown_of_a_saved_plan_renders_the_table_and_counts(saved):
    project, plan = saved
    done = infra("show", str(plan), "--markdown", cwd=project)
    assert done.returncode == 0, done.stderr
    markdown = done.stdout
    assert "\x1b" not in markdown and SECRET not in markdown + done.stderr
    page = render(markdown)
    text = "".join(page.text)
    assert "infra plan: md in workspace mlw-test" in text
    assert "Plan: 2 to add, 1 to change, 2 to destroy." in text
    header, *rows = page.rows
    assert header == ["Action", "Resource", "What changes"]
    assert all(len(row) == 3 for row in rows), rows          # no value made a cell of its own
    by_address = {row[1]: row for row in rows}
    assert set(by_address) == {"cluster.fresh", "cluster.resize", "cluster.retire", "cluster.scale"}
    assert by_address["cluster.scale"][0] == "~ update" and "max_instances: 2 → 4" in by_address["cluster.scale"][2]
    assert by_address["cluster.resize"][0] == "-/+ replace"
    assert "size: Standard_NC4as_T4_v3 → Standard_NC8as_T4_v3 (forces replacement)" in by_address["cluster.resize"][2]
    assert by_address["cluster.retire"][0] == "- destroy"
    assert by_address["cluster.fresh"][0] == "+ create"
    assert re.search(r"Cost per hour at max_instances \(list prices\): \$\d+\.\d\d → \$\d+\.\d\d \(\+\$\d+\.\d\d\)", text)
    # the policy's warning, and the smoke job the new cluster makes pending
    assert "Policy results (4)" in text and "policy.main.warn: cluster.fresh has no owner tag" in text
    assert "Smoke jobs pending (1)" in text and "smoke.ddp" in text
    # the full text plan, folded
    assert ("details", {}) in page.tags and "# cluster.resize must be replaced" in text
    assert "(sensitive value)" in text


def test_nothing_from_the_stack_becomes_html_a_link_or_an_image(saved):
    project, plan = saved
    page = render(infra("show", str(plan), "--markdown", cwd=project).stdout)
    tags = {tag for tag, _ in page.tags}
    assert not tags & {"img", "a", "script"}, tags
    assert "**bold**" in "".join(page.text)   # the tag's **bold** shows as text, asterisks included
    assert "<img src=x onerror=alert(1)> | [click](https://evil.example/)" in "".join(page.text)


def test_plan_markdown_carries_the_policy_results_and_the_saved_plan_note_goes_to_stderr(saved):
    project, _ = saved
    (project / "policy" / "deny.rego").write_text('package main\n\nimport rego.v1\n\ndeny contains "no friday deploys" '
                                                  'if { true }\n')
    try:
        done = infra("plan", "stack.yaml", "--local", "--markdown", cwd=project)
    finally:
        (project / "policy" / "deny.rego").unlink()
    assert done.returncode == 1
    text = "".join(render(done.stdout).text)
    assert "Apply refuses this plan until its errors are fixed." in text
    assert "error policy.main.deny: no friday deploys (policy/deny.rego:5)" in text
    assert "error[policy.main.deny]" in done.stderr and "\x1b" not in done.stdout
    saved_note = infra("plan", "stack.yaml", "--local", "--markdown", "--out", "q.plan", cwd=project)
    assert saved_note.stdout.rstrip().endswith("</details>") and "Saved the plan to q.plan" in saved_note.stderr


def test_a_plan_without_changes_says_so_in_one_line(tmp_path):
    (tmp_path / "stack.yaml").write_text(HEAD + "clusters:\n  gpu: {size: Standard_NC4as_T4_v3, max_instances: 1}\n")
    assert infra("apply", "stack.yaml", "--local", "--auto-approve", "--no-smoke", cwd=tmp_path).returncode == 0
    done = infra("plan", "stack.yaml", "--local", "--markdown", "--out", "none.plan", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().count("\n") == 0, done.stdout
    assert "no changes, the infrastructure matches the stack" in done.stdout
    shown = infra("show", "none.plan", "--markdown", cwd=tmp_path)
    assert shown.stdout == done.stdout


def test_markdown_and_json_are_one_or_the_other(tmp_path):
    (tmp_path / "stack.yaml").write_text(HEAD + "clusters:\n  gpu: {size: Standard_NC4as_T4_v3, max_instances: 1}\n")
    done = infra("plan", "stack.yaml", "--local", "--markdown", "--json", cwd=tmp_path)
    assert done.returncode != 0 and "--json and --markdown" in done.stderr
    stack = infra("show", "stack.yaml", "--markdown", cwd=tmp_path)
    assert stack.returncode == 1 and "error[show.markdown-plan-only]" in stack.stderr
