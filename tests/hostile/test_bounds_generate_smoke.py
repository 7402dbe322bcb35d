"""Bounds where input enters (issue 40): what Azure or a job hands back is read under the same bounds as a stack.

- `plan --generate-config-out` of a live environment whose recorded conda file is a few hundred bytes of nested
  YAML aliases expanded it whole (plan read it through yaml.safe_load, and generate copied every alias): the
  recorded conda file is read as the stack loader reads a conda file (plan/live.py recorded_conda), and one over
  its bounds is left out with a note saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.plan.live import recorded_content_hash

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"


def cli(*args: str, emulator, state: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state))
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def alias_bomb(levels: int) -> dict:
    """A conda mapping whose `channels` are `levels` lists of 9 shared lists: yaml.dump writes each shared list once
    (an anchor, then aliases), so its text is small and what it expands to is 9**levels values."""
    nested: list = ["lol"] * 9
    for _ in range(levels - 1):
        nested = [nested] * 9
    return {"name": "bomb", "channels": nested, "dependencies": ["python=3.10"]}


def test_generate_config_reads_a_live_conda_alias_bomb_under_the_loader_s_bounds(tmp_path, clients, emulator):
    from azure.ai.ml.entities import Environment

    bomb = alias_bomb(6)   # 531,441 values from about 1 KB of YAML: over the loader's 100,000
    assert len(yaml.dump(bomb, sort_keys=True)) < 2000
    # azure-ai-ml sends the conda file as YAML text (yaml.dump, anchors and aliases for the shared lists)
    clients.ml.environments.create_or_update(Environment(name="bomb", version="1", image=IMAGE, conda_file=bomb))
    clients.ml.environments.create_or_update(Environment(
        name="fine", version="1", image=IMAGE, conda_file={"name": "fine", "dependencies": ["python=3.10"]}))
    state, stack, generated = tmp_path / "local", tmp_path / "stack.yaml", tmp_path / "generated.yaml"
    stack.write_text(f"stack: bombed\n{WORKSPACE_YAML}import:\n  - {{to: environment.bomb, id: bomb}}\n"
                     "  - {to: environment.fine, id: fine}\n")
    made = cli("plan", str(stack), "--local", "--generate-config-out", str(generated), emulator=emulator, state=state)
    assert made.returncode == 0, made.stdout + made.stderr
    text = generated.read_text()
    assert len(text) < 4000, len(text)   # never the expanded document
    assert ("# its conda file as recorded is not a YAML mapping infra reads (the document expands to more than "
            "100000 values): left out (add conda_file: yourself)") in text, text
    declared = yaml.safe_load(text)["environments"]
    assert declared["bomb"] == {"image": IMAGE}
    assert declared["fine"]["conda_file"] == {"dependencies": ["python=3.10"], "name": "fine"}   # within: kept

    # merged, the stack plans: the bombed version's content is nothing infra reads, so adopting it registers a new
    # version; the one within the bounds is adopted as it is
    stack.write_text(stack.read_text() + text)
    plan = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert '# environment.bomb will get a new version (version 2)\n  # (imported from "bomb")' in plan.stdout
    assert "# environment.fine will be imported" in plan.stdout, plan.stdout


def test_plan_hashes_a_recorded_conda_file_only_within_the_loader_s_bounds():
    content = {"image": IMAGE, "build": None}
    within = recorded_content_hash({**content, "conda_file": yaml.dump(alias_bomb(5))})   # 59,049 values
    assert within is not None
    for over in (yaml.dump(alias_bomb(6)), "[" * 100 + "]" * 100, "a: " + "x" * (2 << 20)):
        assert recorded_content_hash({**content, "conda_file": over}) is None
