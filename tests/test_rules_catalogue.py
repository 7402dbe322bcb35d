"""The rules as a whole, as tflint keeps its own: every rule declares its id, severity and summary where it is
defined (registry.py `declare`) and has a page (docs/rules/ID.md: what it catches, why, the fix, the source), and
`infra rules` lists them; every id a check reports is one it declares, on every stack of the repository; the order
the checks run in; every declared rule exercised by the test module of its rules module; the shipped stacks clean."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import SchemaErrors, load_stack
from infra_cli.validate.engine import validate_files
from infra_cli.validate.rules import catalogue
from infra_cli.validate.rules.registry import RULES, declare, declared_by

from rules_fixtures import A100, CURATED_ENV, ROOT, check, one_distribution, undeclared


@pytest.mark.parametrize("stack", sorted((ROOT / "stacks").glob("*.yaml")), ids=lambda p: p.name)
def test_example_stacks_have_no_diagnostics(stack):
    assert validate_files([stack]) == []


def test_every_rule_is_exercised_by_the_tests_of_its_module():
    """Each rule a check of rules/MODULE.py declares is named by tests/test_rules_MODULE.py, where a test fails
    without the rule."""
    missing = []
    for fn in RULES:
        module = fn.__module__.rsplit(".", 1)[1]
        tests = (ROOT / "tests" / f"test_rules_{module}.py").read_text(encoding="utf-8")
        missing += [f"{info.id} ({module})" for info in declared_by(fn)
                    if f'"{info.id}"' not in tests and info.id not in UNREACHABLE]
    assert len(RULES) >= 40 and not missing, f"rules without a test beside them: {missing}"


# Declared rules no stack reaches, each with why
UNREACHABLE = {
    "workspace.subscription-id": "the stack model refuses a subscription id that is not a GUID first (model.py _guid); "
                                 "names.yaml's row stays for a copy of validators/ that loosens the model's",
}


# the order the rules run in, so the order diagnostics come out in (the modules of infra_cli/validate/rules/
# register their rules as infra_cli/validate/rules/__init__.py imports them, each in definition order)
RULE_ORDER = [
    "resource_names", "output_references", "import_blocks", "tags",
    "cluster_size", "cluster_infiniband", "cluster_ssh", "cluster_ssh_secret_inline", "cluster_location",
    "cluster_node_public_ip", "cluster_subnet_needs_vnet", "cluster_compute_name", "cluster_low_priority", "serverless_size",
    "environment_name", "environment_requires", "environment_files", "code_paths", "environment_template_parameters",
    "environment_build_steps", "environment_image_reference",
    "distribution_job_bindings", "distribution_bindings_unbound", "distribution_job_inputs", "distribution_job_services", "distribution_identity",
    "distribution_references", "distribution_infiniband", "distribution_gpus", "distribution_instances",
    "distribution_mpi", "distribution_packages", "distribution_framework", "distribution_untyped", "distribution_ray",
    "distribution_command_syntax", "distribution_head_node_launcher", "distribution_launcher",
    "distribution_launcher_declared", "distribution_launcher_gpus", "distribution_launcher_nodes",
    "distribution_launcher_rendezvous", "distribution_node_rank_variable", "distribution_lightning",
    "distribution_tensorflow", "distribution_transformers_local_rank", "distribution_ib_disabled",
    "distribution_launcher_variables",
]


def test_rules_run_in_their_order():
    """A new rule goes into this list where it runs; moving rules between modules keeps the order."""
    assert [fn.__name__ for fn in RULES] == RULE_ORDER


def test_json_shape_of_a_rule_diagnostic(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 16\n"))
    assert list(r.diagnostics[0].to_json()) == ["severity", "rule", "message", "file", "line", "column", "hint"]


def _stacks() -> list[Path]:
    """Every stack file of the repository: stacks/ and those the tests hold (tests/**, a YAML mapping with `stack:`)."""
    found = []
    for p in sorted([*ROOT.glob("stacks/*.yaml"), *ROOT.glob("tests/**/*.yaml")]):
        try:
            document = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if isinstance(document, dict) and "stack" in document:
            found.append(p)
    return found


def test_every_id_a_rule_reports_is_declared_on_every_stack():
    """On each stack under stacks/ and tests/ (the part the schema accepts, where it refuses some), each check
    reports only rule ids it declares, with a severity its rule has (rules_fixtures.undeclared)."""
    stacks, judged = _stacks(), 0
    for path in stacks:
        try:
            loaded = load_stack(path)
        except SchemaErrors as exc:
            loaded = exc.partial
        except DiagnosticError:
            continue
        if loaded is not None:
            judged += 1
            assert undeclared(loaded) == [], path
    assert len(stacks) >= 40 and judged >= 30


def test_a_rule_is_declared_once():
    info = catalogue()[0]
    assert declare(info.id, info.severity, info.summary, info.also) is not None   # the same again: the same rule
    with pytest.raises(ValueError, match="declared twice"):
        declare(info.id, "warning" if info.severity == "error" else "error", info.summary)


PAGE_PARTS = ("## What it catches", "## Why", "## Fix", "## Source")


def test_every_rule_has_a_page_and_every_page_a_rule():
    pages = {p.name[:-3] for p in (ROOT / "docs" / "rules").glob("*.md")}
    ids = [info.id for info in catalogue()]
    assert len(ids) == len(set(ids)) >= 70
    assert sorted(set(ids) - pages) == [], "rules without a page"
    assert sorted(pages - set(ids)) == [], "pages without a rule"


@pytest.mark.parametrize("info", catalogue(), ids=lambda info: info.id)
def test_a_page_says_what_the_rule_catches_why_the_fix_and_its_source(info):
    text = (ROOT / info.doc).read_text(encoding="utf-8")
    assert text.startswith(f"# {info.id}\n")
    assert f"- Severity: {info.severity}" in text
    assert f"- Switchable: {'yes' if info.switchable else 'no'}:" in text
    at = [text.find(part) for part in PAGE_PARTS]
    assert -1 not in at and at == sorted(at), f"{info.doc} needs {PAGE_PARTS} in that order"
    for part, start, end in zip(PAGE_PARTS, at, at[1:] + [len(text)]):
        assert text[start + len(part):end].strip(), f"{info.doc}: {part} is empty"
    assert re.search(r"^- https://\S+$", text[at[-1]:], re.M), f"{info.doc}: its source is a public URL"


def test_infra_rules_lists_every_rule_with_its_page():
    listed = json.loads(_infra("rules", "--json").stdout)
    assert [r["id"] for r in listed] == [info.id for info in catalogue()]
    for r in listed:
        assert set(r) == {"id", "severity", "summary", "doc", "switchable"} and r["summary"], r
        assert r["severity"] in ("error", "warning") and (ROOT / r["doc"]).is_file(), r
    by_id = {r["id"]: r for r in listed}
    assert by_id["distribution.gpus-underused"]["switchable"] and not by_id["distribution.gpus-exceeded"]["switchable"]
    text = _infra("rules").stdout
    for info in catalogue():
        assert f"{info.id}  {info.severity}" in text and info.doc in text


def test_infra_rules_names_a_broken_names_yaml(tmp_path):
    """The names' rules come from validators/names.yaml: a broken copy is one diagnostic, never a traceback."""
    shutil.copytree(ROOT / "validators", tmp_path / "v")
    (tmp_path / "v" / "names.yaml").write_text("names: [1\n")
    done = _infra("rules", INFRA_VALIDATORS_DIR=str(tmp_path / "v"))
    assert done.returncode == 1 and "error[knowledge.invalid]" in done.stderr and "Traceback" not in done.stderr


def _infra(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=120)
