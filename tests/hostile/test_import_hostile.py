"""Attacks on `infra plan --generate-config-out` (issue 33): what Azure returns is data, never stack syntax.

- A tag value `${GITHUB_TOKEN}` on a cluster made outside infra, written as it is, would make the merged stack
  interpolate the environment variable and write the token into Azure: it is written `$${GITHUB_TOKEN}`, the
  loader's escape, and stays text.
- A recorded build context URI with line breaks would end the header comment and add YAML of its own (a cluster):
  comments are one line.
- A recorded conda file that is not YAML, or not a mapping, would be a traceback or be read as a path: left out.
- A FILE that is a dangling symlink would be written through: refused as existing, its target never created.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.plan.generate import _entry
from infra_cli.plan.kinds.environment import environment_declaration

ROOT = Path(__file__).resolve().parent.parent.parent
TOKEN = "ghp_not-a-real-token-0123456789"


def cli(*args: str, emulator, state: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env.update(INFRA_EMULATOR_URL=emulator.url, INFRA_LOCAL_DIR=str(state), GITHUB_TOKEN=TOKEN)
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_a_dollar_read_from_azure_stays_text_and_pulls_no_environment_variable(tmp_path, clients, emulator):
    from azure.ai.ml.entities import AmlCompute

    clients.ml.compute.begin_create_or_update(AmlCompute(
        name="gpu", size="Standard_ND96asr_v4", min_instances=0, max_instances=1,
        tags={"owner": "${GITHUB_TOKEN}", "cost": "$$5"})).result()
    state, stack, generated = tmp_path / "local", tmp_path / "stack.yaml", tmp_path / "generated.yaml"
    stack.write_text(f"stack: dollar\n{WORKSPACE_YAML}import:\n  - {{to: cluster.gpu, id: gpu}}\n")
    made = cli("plan", str(stack), "--local", "--generate-config-out", str(generated), emulator=emulator, state=state)
    assert made.returncode == 0, made.stderr
    text = generated.read_text()
    assert "$${GITHUB_TOKEN}" in text and TOKEN not in text
    stack.write_text(stack.read_text() + text)
    plan = cli("plan", str(stack), "--local", emulator=emulator, state=state)
    assert plan.returncode == 0, plan.stderr
    assert "# cluster.gpu will be imported" in plan.stdout and "Plan: 1 to import, 0 to add, 0 to change" in plan.stdout
    applied = cli("apply", str(stack), "--local", "--auto-approve", "--no-smoke", emulator=emulator, state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert clients.ml.compute.get("gpu").tags["owner"] == "${GITHUB_TOKEN}"   # never the token
    assert TOKEN not in plan.stdout + plan.stderr + applied.stdout + applied.stderr


def test_recorded_line_breaks_and_broken_conda_never_become_yaml():
    values = {"name": "train", "version": "1", "tags": {},
              "content": {"image": None, "conda_file": "{{{ not yaml",
                          "build": {"context_uri": "https://x/ctx\nclusters:\n  evil: {size: Standard_ND96asr_v4}",
                                    "dockerfile_path": "Dockerfile"}}}
    body, notes = environment_declaration(values)
    assert "conda_file" not in body and any("not a YAML mapping" in n for n in notes)
    text = "environments:\n" + _entry("environments", "train", body, notes)
    assert list(yaml.safe_load(text)) == ["environments"]
    assert list(yaml.safe_load(text)["environments"]) == ["train"]
    string_conda = {**values, "content": {"image": "img:1", "conda_file": "conda.yaml", "build": None}}
    body, _ = environment_declaration(string_conda)   # a bare string would be read back as a path: left out
    assert body == {"image": "img:1"}


def test_a_dangling_symlink_as_the_file_is_refused(tmp_path):
    stack, link, target = tmp_path / "stack.yaml", tmp_path / "generated.yaml", tmp_path / "elsewhere.yaml"
    stack.write_text(f"stack: link\n{WORKSPACE_YAML}")
    link.symlink_to(target)
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", "--generate-config-out",
                        str(link)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "local")})
    assert r.returncode == 1 and "error[generate-config.exists]" in r.stderr and "Traceback" not in r.stderr
    assert not target.exists()
