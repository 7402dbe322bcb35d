"""The reusable CI steps this repository offers: action.yml (a composite GitHub Action running
`infra image check`) and .pre-commit-hooks.yaml, each run the way GitHub Actions and pre-commit run them."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from image_fixtures import images, registry  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _run_action(tmp_path: Path, **given: str) -> tuple[int, dict, str, str]:
    """Run action.yml's check step as the Actions runner would: inputs (defaults, then `given`) substituted
    into the step's `env`, `github.action_path` into its `run`, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY set."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(given) - set(inputs)
    assert not unknown, f"not inputs of the action: {unknown}"
    inputs.update(given)
    context = {f"inputs.{k}": v for k, v in inputs.items()} | {"github.action_path": str(ROOT)}

    def expand(text: str) -> str:
        return EXPRESSION.sub(lambda m: context[m.group(1)], text)

    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    output, summary = tmp_path / "github_output", tmp_path / "summary.md"
    env = {**os.environ, **{k: expand(str(v)) for k, v in step["env"].items()},
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    proc = subprocess.run([step["shell"], "-c", expand(step["run"])], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    json_path = tmp_path / inputs["json-output"]
    verdict = json.loads(json_path.read_text()) if json_path.exists() and json_path.read_text().strip() else {}
    outputs = output.read_text() if output.exists() else ""
    return proc.returncode, verdict, outputs + (summary.read_text() if summary.exists() else ""), proc.stderr


def test_action_passes_an_image_with_open_mpi_and_records_the_verdict(images, tmp_path):
    code, verdict, said, stderr = _run_action(tmp_path, image=images.refs["openmpi"], require="openmpi>=4.1\n\n mpi ")
    assert code == 0, stderr
    assert verdict and all(r["met"] for r in verdict["requirements"]), verdict
    assert [r["requirement"] for r in verdict["requirements"]] == ["openmpi>=4.1", "mpi"]
    assert "json=image-check.json" in said and "all requirements met" in said


def test_action_fails_an_image_without_open_mpi_and_one_it_cannot_read(images, tmp_path):
    code, verdict, said, _ = _run_action(tmp_path, image=images.refs["mpich"])
    assert code == 1 and "NOT met" in said
    assert not verdict["requirements"][0]["met"]
    code, _, said, _ = _run_action(tmp_path, image=f"oci:{tmp_path / 'absent'}:x", **{"json-output": "out.json"})
    assert code == 2 and "could not be read" in said


def test_action_inputs_cannot_inject_commands(tmp_path):
    marker = tmp_path / "pwned"
    code, _, _, _ = _run_action(tmp_path, image=f'x"; touch {marker}; echo "', require=f"openmpi\n$(touch {marker})")
    assert code != 0 and not marker.exists()


def test_pre_commit_hooks_run_as_pre_commit_runs_them(images, tmp_path):
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"infra-validate", "infra-image-check"}
    validate = hooks["infra-validate"]
    stacks = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "stacks").glob("*.yaml"))]
    assert all(re.search(validate["files"], s) for s in stacks)
    # pre-commit runs `entry args... filenames...` from the repository root
    r = subprocess.run(shlex.split(validate["entry"]) + stacks, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    check = hooks["infra-image-check"]
    assert check["pass_filenames"] is False
    args = [images.refs["openmpi"], "--require", "openmpi>=4.1"]
    r = subprocess.run(shlex.split(check["entry"]) + args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(shlex.split(check["entry"]) + [images.refs["mpich"]], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
