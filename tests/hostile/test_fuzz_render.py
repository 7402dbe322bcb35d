"""Hypothesis over `infra render`'s outputs: whatever text a stack's free fields hold (a cluster's description and
tags, a job's display name, description, tags, environment variables and command), the files render writes read
back, as YAML, to exactly those values, and nothing in them adds a key of its own (no YAML injection: `: `, `#`,
quotes, `{{`, `- `, line breaks in free text). A value validate refuses is refused with a diagnostic, never a
traceback, and then nothing is written."""

from __future__ import annotations

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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.fixed_dictionaries({
    "cluster_description": TEXT, "cluster_tags": st.dictionaries(NAME, ONE_LINE, max_size=3),
    "command": TEXT, "display_name": ONE_LINE, "description": TEXT,
    "tags": st.dictionaries(NAME, ONE_LINE, max_size=3),
    "environment_variables": st.dictionaries(NAME.map(lambda n: "X_" + n), TEXT, max_size=3)}))
def test_rendered_files_read_back_as_the_values_given(tmp_path, values):
    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    (work / "src").mkdir(parents=True)
    (work / "src" / "train.py").write_text("print(1)\n", encoding="utf-8")
    stack = work / "stack.yaml"
    stack.write_text(yaml.safe_dump(_stack(values), allow_unicode=True), encoding="utf-8")
    out = work / "out"
    try:
        render_stack(stack, out)
    except DiagnosticError as refused:   # validate's refusal: said at a line, nothing written
        assert refused.diagnostics and all(d.message for d in refused.diagnostics)
        assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
        return
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
