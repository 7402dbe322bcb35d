"""What users and their scripts read does not move under a refactor: `infra validate --json` and `infra plan --json`
of every stack under stacks/ and tests/ are held byte for byte against the files in tests/fixtures/golden/.

A change that means to change that output regenerates them (INFRA_UPDATE_GOLDEN=1 python3 -m pytest -q
tests/test_output_unchanged.py) and the diff of the golden files shows, in review, exactly what users will see
change. Plans run on one local Azure made for this module, in the files' sorted order (each plan sees the
workspace the first one made, as a user's second command does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
UPDATE = os.environ.get("INFRA_UPDATE_GOLDEN") == "1"


def _is_stack(path: Path) -> bool:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return "bad_stacks" in path.parts    # the broken stacks are stacks too: validate's answer to them is held
    return isinstance(document, dict) and "stack" in document


STACKS = sorted(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("stacks/*.yaml"), *ROOT.glob("tests/**/*.yaml")]
                if "golden" not in p.parts and _is_stack(p))


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, env=env, capture_output=True,
                          timeout=300)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_") and k not in ("NO_COLOR", "TERM")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="120", **extra)
    return env


def _hold(kind: str, stack: str, done: subprocess.CompletedProcess) -> None:
    golden = GOLDEN / kind / (stack.replace("/", "__") + ".json")
    seen = done.stdout + f"\n# exit {done.returncode}\n".encode()
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(seen)
        return
    assert golden.exists(), f"no golden file for {stack}: INFRA_UPDATE_GOLDEN=1 python3 -m pytest -q {__file__}"
    assert seen == golden.read_bytes(), (
        f"`infra {kind} --json {stack}` changed; if meant, regenerate with INFRA_UPDATE_GOLDEN=1 and review the "
        f"diff of {golden.relative_to(ROOT)}:\n{seen.decode(errors='replace')[-3000:]}")


def test_every_stack_is_held():
    assert len(STACKS) >= 40 and "stacks/ib-a100.yaml" in STACKS, STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_validate_json_is_unchanged(stack):
    _hold("validate", stack, _run("validate", "--json", stack, env=_env()))


@pytest.fixture(scope="module")
def local_cloud(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("golden-cloud")


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_is_unchanged(stack, local_cloud):
    _hold("plan", stack, _run("plan", stack, "--local", "--json", env=_env(INFRA_LOCAL_DIR=str(local_cloud))))
