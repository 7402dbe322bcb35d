"""Attacks on issue 41's part (base-image evidence per family, low-priority data, binding rules): a hand-edited
validators/ row that breaks the new fields is one knowledge.invalid diagnostic with its place, never a traceback
nor a silent default; a secret environment variable is never quoted by the binding rules; an AzureML image name
built to look like a known family is not read as it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.knowledge.base_images import build_knowledge
from infra_cli.paths import validators_dir
from rules_fixtures import A100, CURATED_ENV, check, one_distribution

ROOT = Path(__file__).resolve().parents[2]


def _validate_with(tmp_path: Path, file: str, old: str, new: str, stack_body: str) -> dict:
    copy = tmp_path / "validators"
    shutil.copytree(validators_dir(), copy)
    text = (copy / file).read_text(encoding="utf-8")
    assert old in text, old
    (copy / file).write_text(text.replace(old, new, 1), encoding="utf-8")
    (tmp_path / ".git").mkdir(exist_ok=True)
    stack = tmp_path / "stack.yaml"
    stack.write_text("stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
                     "name: mlw-s, location: eastus}\n" + stack_body, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack), "--json"], capture_output=True,
                         text=True, env={**os.environ, "INFRA_VALIDATORS_DIR": str(copy)}, timeout=120, cwd=tmp_path)
    assert "Traceback" not in run.stderr, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("file, old, new, needle", [
    ("base_images.yaml", "    others: unknown\n", "    others: maybe\n", "others"),
    ("skus.yaml", "    low_priority: false\n", "    low_priority: \"no\"\n", "low_priority"),
    ("skus.yaml", "    low_priority_source: >-\n", "    low_priority_sources: >-\n", "low_priority_source"),
])
def test_a_broken_new_field_is_one_diagnostic_naming_it(tmp_path, file, old, new, needle):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text("FROM nvcr.io/nvidia/pytorch:24.05-py3\nRUN git clone x\n")
    body = ("clusters:\n  gpu: {size: Standard_ND96isr_H100_v5, max_instances: 1, tier: low_priority}\n"
            "environments:\n  env: {build: {path: ctx}}\n")
    out = _validate_with(tmp_path, file, old, new, body)
    broken = [d for d in out["diagnostics"] if d["rule"] == "knowledge.invalid"]
    assert broken and needle in broken[0]["message"] and file in (broken[0]["file"] or broken[0]["message"]), out


def test_a_secret_environment_variable_is_never_quoted_by_the_binding_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKEN_WITH_BINDING", "s3cr3t-${{inputs.data}}-value")
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                            "inputs: {data: 1}\nenvironment_variables:\n  TOKEN: ${TOKEN_WITH_BINDING}\n"
                            "command: python train.py --data ${{inputs.data}}\n")
    r = check(tmp_path, body)
    assert all("s3cr3t" not in d.message + d.hint for d in r.diagnostics), r.diagnostics


@pytest.mark.parametrize("reference", [
    "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04-evil:latest",    # a longer name
    "evil.example.com/mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04:latest",
    "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04x",
])
def test_a_look_alike_image_is_not_read_as_the_family(reference):
    assert build_knowledge().base(reference) is None
