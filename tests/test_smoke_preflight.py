"""The smoke job's preflight: before any launcher or rank starts, the job's own `python` must find the modules the
smoke imports and the launcher its command starts (templates/smoke/preflight.py.j2, run first by every smoke
job's command). A framework missing there ends the job at once, INCOMPLETE, with the module named and the fix
for where the job ran; DeepSpeed missing from infra's own Python used to surface only after every rank had
imported torch and met (119 s at 2 nodes x 8 ranks on the emulator).

Absence is real absence as Python sees it (tests/hidden_modules.py: no finder finds the module), not a package
whose import raises: a preflight that only locates modules must tell the two apart truthfully.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hidden_modules import VARIABLE, without_modules

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600
STEP = "infra-smoke step: "   # what the smoke script prints as each rank reaches a step (smoke/run.py STEP_MARKER)

# DeepSpeed launched per node by torchrun: the preflight checks deepspeed, torch, numpy and torchrun
STACK = {
    "stack": "preflight",
    "workspace": {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg-test",
                  "name": "mlw-test", "location": "eastus"},
    "clusters": {"gpu2": {"size": "Standard_NC80adis_H100_v5", "max_instances": 1, "infiniband": "optional"}},
    "environments": {"acpt": {"curated": "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}},
    "distributions": {"deepspeed": {"cluster": "gpu2", "environment": "acpt", "type": "pytorch",
                                    "framework": "deepspeed", "launcher": "per-node", "instance_count": 1}},
}


def _stack(tmp_path: Path) -> Path:
    path = tmp_path / "preflight.yaml"
    path.write_text(yaml.safe_dump(STACK, sort_keys=False))
    return path


def _infra(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)


@pytest.mark.runs_jobs
def test_a_missing_framework_ends_the_job_at_its_preflight_before_any_rank(tmp_path):
    """deepspeed absent from the job's python (infra's own, on the emulator): the job ends at its preflight with
    one line naming it, no launcher or rank ever starts, and the verdict is INCOMPLETE with the module named and
    the local fix (the extra that installs it where infra runs)."""
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k != "INFRA_EMULATOR_URL"}
    env = without_modules(tmp_path / "hide", {**env, "INFRA_LOCAL_DIR": str(tmp_path / "local"),
                                               "PYTHONPATH": str(ROOT)}, "deepspeed")
    stack = _stack(tmp_path)
    applied = _infra(env, tmp_path, "apply", str(stack), "--auto-approve", "--local", "--no-smoke")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    r = _infra(env, tmp_path, "smoke", str(stack), "--local", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    [verdict] = json.loads(r.stdout)
    assert not verdict["passed"] and "deepspeed is not importable here" in verdict["incomplete"]
    assert "No module named 'deepspeed'" in verdict["incomplete"]
    judged = {j["name"]: (j["outcome"], j["detail"]) for j in verdict["judgements"]}
    assert judged["job"][0] == "skipped" and "ended Failed at its preflight, before any rank started" in judged["job"][1]
    assert all(outcome != "fail" for outcome, _ in judged.values()), judged
    [finding] = verdict["findings"]
    assert finding["signature"] == "framework-missing" and "deepspeed is not installed where the job ran" in finding["cause"]
    assert "infra's own Python" in finding["fix"] and "pip install -e '.[frameworks]'" in finding["fix"]
    # The job's log: the preflight's one line, and nothing from torchrun or a rank of the smoke script.
    logs = Path(verdict["logs_dir"])
    try:
        texts = {p.relative_to(logs).as_posix(): p.read_text() for p in logs.rglob("*.txt")}
        assert texts, f"no logs under {logs}"
        said = [line for text in texts.values() for line in text.splitlines()]
        assert [line for line in said if line.startswith("infra-preflight: ")] == [
            f"infra-preflight: missing deepspeed: {verdict['incomplete']}"]
        assert not any(STEP in line or "torch.distributed" in line for line in said), texts
        [result] = [json.loads(p.read_text()) for p in logs.rglob("smoke-result.json")]
        assert result["kind"] == "preflight" and result["node"]["emulated"] is True
        assert not list(logs.rglob("*.tmp"))
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _preflight_of_rendered_job(tmp_path: Path) -> tuple[str, Path]:
    """The preflight part of the rendered smoke job's command (what runs before `&&`), and the job's folder."""
    out = tmp_path / "render"
    r = subprocess.run([sys.executable, "-m", "infra_cli", "render", str(_stack(tmp_path)), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    job = yaml.safe_load((out / "jobs" / "deepspeed" / "smoke-job.yml").read_text())
    preflight, sep, _rest = job["command"].partition(" && ")
    assert sep and preflight == ("python preflight.py --module torch --module numpy --framework deepspeed=deepspeed "
                                 "--launcher torchrun --outputs outputs")
    return preflight, out / "jobs" / "deepspeed"


def test_a_present_framework_passes_the_preflight(tmp_path):
    """The rendered job's preflight, run as its command runs it (sh, in the job's folder, `python` on PATH): with
    deepspeed, torch, numpy and torchrun all there it says so in one line, exits 0 and writes no result (the smoke
    goes on); hide deepspeed and the same command stops with the line naming it."""
    preflight, folder = _preflight_of_rendered_job(tmp_path)
    # A Python whose path holds them all: packages as empty as the check needs (it locates, never imports), so
    # the test holds with or without the frameworks extra; `python` and `torchrun` first on PATH.
    site = tmp_path / "site"
    for name in ("torch", "numpy", "deepspeed"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("raise AssertionError('the preflight must not import me')\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "torchrun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "torchrun").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    env = without_modules(tmp_path / "hide", {**env, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
                                               "PYTHONPATH": str(site)})
    ok = subprocess.run(["sh", "-c", preflight], cwd=folder, env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("infra-preflight: ok: torch, numpy, deepspeed found by ") and ok.stderr == ""
    assert f"torchrun at {bin_dir / 'torchrun'}" in ok.stdout and not (folder / "outputs").exists()

    hidden = subprocess.run(["sh", "-c", preflight], cwd=folder, env={**env, VARIABLE: "deepspeed"},
                            capture_output=True, text=True, timeout=60)
    assert hidden.returncode == 1
    assert hidden.stdout.startswith("infra-preflight: missing deepspeed: deepspeed is not importable here "
                                    "(No module named 'deepspeed' on the import path of ")
    result = json.loads((folder / "outputs" / "smoke-result.json").read_text())
    assert result["kind"] == "preflight" and result["missing"] in hidden.stdout and result["node"]["emulated"] is False
