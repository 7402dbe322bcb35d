"""Attacks on issue 43's command-line surface: a live value that looks like a variable reference in a generated
declaration, -chdir at something that is no folder, a plan file's `local` record edited."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from emulator_fixtures import WORKSPACE_YAML


def _cli(*args, tmp_path: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD" and not k.startswith("AZURE_")}
    env["INFRA_LOCAL_DIR"] = str(tmp_path / "cloud")
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, **kw)


def test_a_live_tag_that_reads_like_a_variable_stays_text_and_declares_nothing(tmp_path):
    owner, stack, generated = tmp_path / "owner.yaml", tmp_path / "adopt.yaml", tmp_path / "generated.yaml"
    owner.write_text(f"""stack: owner
{WORKSPACE_YAML}clusters:
  gpu:
    size: Standard_D4s_v3
    max_instances: 1
    tags: {{note: "$${{var.evil}} and $${{HOME}}"}}
""")
    r = _cli("apply", str(owner), "--local", "--auto-approve", "--no-smoke", tmp_path=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _cli("state", "rm", "cluster.gpu", str(owner), "--local", tmp_path=tmp_path).returncode == 0
    stack.write_text(f"stack: adopt\n{WORKSPACE_YAML}import:\n  - {{to: cluster.gpu, id: gpu}}\n")
    r = _cli("plan", str(stack), "--local", "--generate-config-out", str(generated), tmp_path=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    body = yaml.safe_load(generated.read_text())
    assert "variables" not in body   # no secret, and the tag's ${var.evil} is no variable to declare
    assert body["clusters"]["gpu"]["tags"]["note"] == "$${var.evil} and $${HOME}"
    assert "infiniband" not in body["clusters"]["gpu"]   # a CPU size: nothing to require


def test_chdir_at_a_file_or_nothing_is_a_clear_error(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for where in (afile, tmp_path / "missing", ""):
        r = _cli(f"-chdir={where}", "validate", "stack.yaml", tmp_path=tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr and "chdir" in r.stderr, r.stderr
