"""Hypothesis over `infra render`'s outputs: whatever text a stack's free fields hold (a cluster's description and
tags, a job's display name, description, tags, environment variables and command), the files render writes read
back, as YAML, to exactly those values, and nothing in them adds a key of its own (no YAML injection: `: `, `#`,
quotes, `{{`, `- `, line breaks in free text). The values generated for that are all ones render must accept (a
refusal fails the test: issue 40 found 12 of 40 examples returning early); the values validate refuses (a command
that is not valid shell, a control character in an environment variable) are generated apart, and each is refused
with a diagnostic, never a traceback, and nothing written."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError

# Printable text of every script, with the characters YAML and shells give a meaning to; no `$` (the stack's
# interpolation, tested elsewhere) and no control characters (refused by the loader, tested elsewhere).
TRICKY = ": #'\"{}[]&*!|>%@`,?-\\\n\t"
TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="$")
               | st.sampled_from(TRICKY), min_size=1, max_size=40)
ONE_LINE = TEXT.map(lambda s: s.replace("\n", " ").replace("\t", " ")).filter(lambda s: s.strip())
NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True)


def _stack(values: dict) -> dict:
    return {
        "stack": "fuzz",
        "workspace": {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg",
                      "name": "mlw", "location": "eastus"},
        "clusters": {"gpu": {"size": "Standard_ND96asr_v4", "max_instances": 2,
                             "description": values["cluster_description"], "tags": values["cluster_tags"]}},
        "environments": {"acpt": {"curated": "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}},
        "distributions": {"train": {
            "cluster": "gpu", "environment": "acpt", "code": "src", "type": "pytorch", "instance_count": 2,
            "process_count_per_instance": 8, "command": "python train.py " + values["command"],
            "display_name": values["display_name"], "description": values["description"], "tags": values["tags"],
            "environment_variables": values["environment_variables"]}},
    }


# A command render must accept: the text as shell words (validate holds a command to shell's grammar), each word
# quoted as a user would when it holds what the shell reads (shlex.quote leaves plain words bare).
COMMAND = st.lists(TEXT, min_size=1, max_size=3).map(lambda words: " ".join(shlex.quote(w) for w in words))


def _render(tmp_path: Path, values: dict) -> Path:
    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    (work / "src").mkdir(parents=True)
    (work / "src" / "train.py").write_text("print(1)\n", encoding="utf-8")
    stack = work / "stack.yaml"
    stack.write_text(yaml.safe_dump(_stack(values), allow_unicode=True), encoding="utf-8")
    render_stack(stack, work / "out")   # a refusal (DiagnosticError) fails the test: every value here is valid
    return work / "out"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.fixed_dictionaries({
    "cluster_description": TEXT, "cluster_tags": st.dictionaries(NAME, ONE_LINE, max_size=3),
    "command": COMMAND, "display_name": ONE_LINE, "description": TEXT,
    "tags": st.dictionaries(NAME, ONE_LINE, max_size=3),
    "environment_variables": st.dictionaries(NAME.map(lambda n: "X_" + n), ONE_LINE, max_size=3)}))
def test_rendered_files_read_back_as_the_values_given(tmp_path, values):
    out = _render(tmp_path, values)
    cluster = yaml.safe_load((out / "clusters" / "gpu.yml").read_text(encoding="utf-8"))
    assert cluster["description"] == values["cluster_description"]
    assert {k: v for k, v in (cluster.get("tags") or {}).items() if not k.startswith("infra.")} == values["cluster_tags"]
    job = yaml.safe_load((out / "jobs" / "train" / "train-job.yml").read_text(encoding="utf-8"))
    assert job["command"] == "python train.py " + values["command"]
    assert (job["display_name"], job["description"]) == (values["display_name"], values["description"])
    assert {k: v for k, v in job["tags"].items() if not k.startswith("infra.")} == values["tags"]
    assert {k: v for k, v in (job.get("environment_variables") or {}).items() if k.startswith("X_")} == \
        values["environment_variables"]
    assert job["compute"] == "azureml:gpu" and job["type"] == "command"   # no key added by a value
    assert set(Path(p).name for p in out.rglob("*.yml")) <= {"gpu.yml", "train-job.yml", "smoke-job.yml",
                                                               "acpt.yml"}


ACCEPTED = {"cluster_description": "d", "cluster_tags": {}, "command": "--epochs 1", "display_name": "n",
            "description": "d", "tags": {}, "environment_variables": {}}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(refused=st.one_of(
    # a quote or backtick never closed: not shell, which validate refuses (distribution.command-syntax)
    st.sampled_from(["'", '"', "`"]).flatmap(
        lambda q: TEXT.filter(lambda t: q not in t).map(lambda t: {"command": q + t})),
    # a line break or tab in an environment variable's value (stack.invalid: no control characters)
    st.tuples(ONE_LINE, st.sampled_from(["\n", "\t"]), ONE_LINE).map(
        lambda parts: {"environment_variables": {"X_A": "".join(parts)}})))
def test_values_validate_refuses_are_refused_with_a_diagnostic_and_nothing_written(tmp_path, refused):
    values = {**ACCEPTED, **refused}
    try:
        _render(tmp_path, values)
    except DiagnosticError as exc:
        errors = [d for d in exc.diagnostics if d.severity == "error"]
        assert errors and all(d.message and d.line for d in errors), exc.diagnostics
        assert {d.rule for d in errors} <= {"distribution.command-syntax", "stack.invalid"}, exc.diagnostics
    else:
        raise AssertionError(f"rendered what validate refuses: {refused!r}")
    out = tmp_path / "w" / "out"
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


def test_the_accepted_values_render(tmp_path):
    """The refused test's base values are accepted: what it sees refused is the value it varies."""
    assert (_render(tmp_path, ACCEPTED) / "jobs" / "train" / "train-job.yml").is_file()
