"""Every rendered file of every stack in the repository loads in azure-ai-ml: the README promises that `infra
render` writes files `az ml ... create -f` accepts. The walk renders each stack file of stacks/ and tests/ (a YAML
file with a top-level `stack:`) that validates, and loads every cluster file with load_compute, every environment
file with load_environment and every job file (smoke and training) with load_job. The stacks tests/realworld builds
from public files are walked by their own tests (test_public_jobs.py, test_sdk_corpus.py), which render and load
the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra_cli.apply.files import render_stack
from infra_cli.diagnostics import DiagnosticError

pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

ROOT = Path(__file__).resolve().parent.parent


def _is_stack(path: Path) -> bool:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and "stack" in doc and "workspace" in doc


STACKS = sorted(p for folder in (ROOT / "stacks", ROOT / "tests") for p in folder.rglob("*.y*ml")
                if p.suffix in (".yaml", ".yml") and "realworld" not in p.parts and _is_stack(p))


def _loader(relative: Path):
    from azure.ai.ml import load_compute, load_environment, load_job

    top = relative.parts[0]
    if top == "clusters":
        return load_compute
    if top == "environments" and len(relative.parts) == 2:  # not the files of a build context
        return load_environment
    if top == "jobs" and len(relative.parts) == 3:
        return load_job
    return None


def test_the_walk_finds_the_shipped_and_the_guides_stacks():
    names = {p.relative_to(ROOT).as_posix() for p in STACKS}
    assert {"stacks/ib-a100.yaml", "tests/guides/stacks/horovod_mpi.yaml"} <= names and len(names) >= 35


@pytest.mark.parametrize("stack", STACKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_rendered_file_loads_in_azure_ai_ml(stack, tmp_path, monkeypatch):
    pytest.importorskip("azure.ai.ml")
    for name in ("RENDER_TEST_PASSWORD", "RENDER_TEST_SSH_KEY"):  # tests/fixtures/render/full.yaml's ${VAR}s
        monkeypatch.setenv(name, "ssh-rsa AAAAB3NzaWALKKEY" if name.endswith("KEY") else "pw-Walk3d-secret")
    try:
        written, _ = render_stack(stack, tmp_path / "out")
    except DiagnosticError as exc:
        assert any(d.severity == "error" for d in exc.diagnostics)
        pytest.skip("the stack does not validate: render writes nothing (tests/test_render_files.py)")
    loaded = 0
    for path in written:
        if path.suffix != ".yml":
            continue
        loader = _loader(path.relative_to(tmp_path / "out"))
        if loader is None:
            continue
        try:
            loader(path)
        except Exception as exc:  # marshmallow's ValidationError or azure-ai-ml's own
            pytest.fail(f"{path.relative_to(tmp_path)} of {stack.relative_to(ROOT)} does not load in azure-ai-ml: "
                        f"{str(exc)[:2000]}")
        loaded += 1
    assert loaded >= 1
