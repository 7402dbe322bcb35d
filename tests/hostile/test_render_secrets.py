"""`infra render` writes no secret silently (issue 40): a sensitive map given whole as `environment_variables`, a
sensitive variable or `${VAR}` in a job's `command`, an input's SAS URL, a sensitive value in a cluster's or an
environment's file: each is refused at the value (file:line:column of the stack), naming the ways out (read it at
run time from Key Vault, or `--write-secrets`), and nothing is written. With `--write-secrets` the files holding a
secret are mode 0600 and every run warns of each. The value never reaches the output.

Before: all of them were written in clear into render's job files (which a job uploads with its code), with no
warning.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-Secret-5c1e9a"          # from ${TOKEN}
API_KEY = "sk-live-7d2f90b3"         # in a sensitive map variable
SIG = "SiGnAtUrE0fTheSAS%3D"         # a SAS URL's signature, written in the stack
PASSWORD = "hunter2-8b1d"            # a sensitive string variable
SECRETS = (TOKEN, API_KEY, SIG, PASSWORD)

HEAD = """\
stack: sec
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
variables:
  keys: {type: map, sensitive: true, default: {API_KEY: %s}}
  password: {type: string, sensitive: true, default: %s}
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  train:
    cluster: gpu
    environment: acpt
    code: src
    type: pytorch
    process_count_per_instance: 8
""" % (API_KEY, PASSWORD)

CASES = {
    # name: (the distribution's lines, the stack path refused, the files named, what the message says)
    "map-whole": ('    command: python train.py\n    environment_variables: "${var.keys}"\n',
                  "distributions.train.environment_variables", ["jobs/train/smoke-job.yml", "jobs/train/train-job.yml"],
                  "a sensitive map given whole (from ${var.keys})"),
    "env-in-command": ('    command: "python train.py --token ${TOKEN}"\n', "distributions.train.command",
                       ["jobs/train/train-job.yml"], "a sensitive value (from ${TOKEN})"),
    "variable-in-command": ('    command: "python train.py --password ${var.password}"\n', "distributions.train.command",
                            ["jobs/train/train-job.yml"], "a sensitive value (from ${var.password})"),
    "sas-input": ('    command: python train.py --data ${{inputs.data}}\n    inputs:\n      data:\n        type: uri_folder\n'
                  f'        path: "https://acct.blob.core.windows.net/data/x?sv=2022-11-02&se=2030-01-01&sp=r&sig={SIG}"\n',
                  "distributions.train.inputs.data.path", ["jobs/train/train-job.yml"],
                  "a SAS URL (its `sig=` signature is a credential to the data)"),
    "sas-in-a-variable": ('    command: python train.py\n    environment_variables:\n'
                          f'      DATA: "https://acct.blob.core.windows.net/data?sp=r&sig={SIG}"\n',
                          "distributions.train.environment_variables.DATA",
                          ["jobs/train/smoke-job.yml", "jobs/train/train-job.yml"],
                          "a SAS URL (its `sig=` signature is a credential to the data)"),
    "sas-input-from-env": ('    command: python train.py --data ${{inputs.data}}\n    inputs:\n      data:\n'
                           '        type: uri_folder\n        path: "${DATA_URL}"\n',
                           "distributions.train.inputs.data.path", ["jobs/train/train-job.yml"],
                           "a sensitive value (from ${DATA_URL})"),
}


def infra(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("INFRA_DEBUG", "INFRA_PLAN_KEY")}
    environ.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(cwd / "state"), TOKEN=TOKEN,
                   DATA_URL=f"https://acct.blob.core.windows.net/data/x?sv=2022-11-02&sp=r&sig={SIG}")
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=environ)


def project(tmp_path: Path, lines: str, head: str = HEAD) -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text("print(1)\n")
    (tmp_path / "stack.yaml").write_text(head + lines)
    return tmp_path / "stack.yaml"


def line_of(path: Path, fragment: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if fragment in line)


def no_secret_in(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_secret_in_a_job_file_is_refused_at_its_value_and_nothing_is_written(tmp_path, case):
    lines, where, files, what = CASES[case]
    stack = project(tmp_path, lines)
    r = infra("render", "stack.yaml", "--out", "out", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    fragment = {"map-whole": "${var.keys}", "sas-input": "sig=", "sas-input-from-env": "${DATA_URL}",
                "sas-in-a-variable": "sig="}.get(
        case, "command:")
    shown = ", ".join(f"out/{f}" for f in files)
    assert re.search(rf"^stack\.yaml:{line_of(stack, fragment)}:\d+: error\[render\.secret\]: {re.escape(where)} is "
                     rf"{re.escape(what)}: render would write it in clear into {re.escape(shown)} ", r.stderr, re.M), \
        r.stderr
    hint = r.stderr.split("error[render.secret]", 1)[1]
    assert "Key Vault" in hint and "how-to-use-secrets-in-runs" in hint and "--write-secrets" in hint
    # an environment value is sensitive as such: one that is no secret has a way that is not (a plain variable)
    assert ("if it is no secret, pass it as a variable that is not sensitive" in hint) == (
        case in ("env-in-command", "sas-input-from-env")), hint
    assert not (tmp_path / "out").exists()
    no_secret_in(r.stdout + r.stderr)


@pytest.mark.parametrize("lines, where, fragment", [
    ("", "clusters.gpu.description", "description:"),
    ("", "clusters.gpu.tags.owner", "owner:"),
])
def test_a_secret_in_a_clusters_file_is_refused(tmp_path, lines, where, fragment):
    head = HEAD.replace("  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\n",
                        "  gpu:\n    size: Standard_ND96asr_v4\n    max_instances: 2\n"
                        "    description: \"for ${var.password}\"\n    tags:\n      owner: \"${TOKEN}\"\n")
    stack = project(tmp_path, "    command: python train.py\n", head)
    r = infra("render", "stack.yaml", "--out", "out", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"stack.yaml:{line_of(stack, fragment)}:" in r.stderr
    assert f"error[render.secret]: {where} is a sensitive value" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    no_secret_in(r.stdout + r.stderr)


def test_write_secrets_writes_a_clusters_secret_in_clear_0600(tmp_path):
    """--write-secrets writes the value itself (not its redacted form), and only the file holding it is private."""
    head = HEAD.replace("  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\n",
                        "  gpu:\n    size: Standard_ND96asr_v4\n    max_instances: 2\n    tags:\n      owner: \"${TOKEN}\"\n")
    project(tmp_path, "    command: python train.py\n", head)
    r = infra("render", "stack.yaml", "--out", "out", "--write-secrets", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "warning[render.secret-written]: clusters.gpu.tags.owner is a sensitive value (from ${TOKEN})" in r.stderr
    cluster = tmp_path / "out" / "clusters" / "gpu.yml"
    assert yaml.safe_load(cluster.read_text())["tags"]["owner"] == TOKEN
    assert stat.S_IMODE(cluster.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "out" / "jobs" / "train" / "train-job.yml").stat().st_mode) != 0o600
    no_secret_in(r.stdout + r.stderr)


def test_one_environment_variable_from_a_secret_is_written_as_its_reference(tmp_path):
    """The way out the whole map's hint names: each variable its own ${VAR}; the file holds the reference."""
    project(tmp_path, '    command: python train.py\n    environment_variables:\n      API_TOKEN: "${TOKEN}"\n')
    r = infra("render", "stack.yaml", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    job = (tmp_path / "out" / "jobs" / "train" / "train-job.yml").read_text()
    assert yaml.safe_load(job)["environment_variables"]["API_TOKEN"] == "${TOKEN}"
    assert "--set environment_variables.API_TOKEN=" in job
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            no_secret_in(path.read_text(errors="replace"))
            assert stat.S_IMODE(path.stat().st_mode) & 0o044, f"{path} made private though it holds no secret"


def test_write_secrets_writes_them_0600_and_warns_on_every_run(tmp_path):
    project(tmp_path, '    command: "python train.py --token ${TOKEN}"\n    environment_variables: "${var.keys}"\n'
            + CASES["sas-input"][0].split("\n", 1)[1] + '      more:\n        type: uri_folder\n        path: "${DATA_URL}"\n')
    for _ in range(2):   # every run warns, not only the first
        r = infra("render", "stack.yaml", "--out", "out", "--write-secrets", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        for where in ("command", "environment_variables", "inputs.data.path", "inputs.more.path"):
            assert f"warning[render.secret-written]: distributions.train.{where} is " in r.stderr, r.stderr
        assert "(--write-secrets, mode 0600)" in r.stderr
        no_secret_in(r.stdout + r.stderr)
    jobs = tmp_path / "out" / "jobs" / "train"
    train = yaml.safe_load((jobs / "train-job.yml").read_text())
    assert train["command"] == f"python train.py --token {TOKEN}"
    assert train["environment_variables"]["API_KEY"] == API_KEY
    assert SIG in train["inputs"]["data"]["path"] and SIG in train["inputs"]["more"]["path"]
    assert yaml.safe_load((jobs / "smoke-job.yml").read_text())["environment_variables"]["API_KEY"] == API_KEY
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            holds = any(s in path.read_text(errors="replace") for s in SECRETS)
            assert (stat.S_IMODE(path.stat().st_mode) == 0o600) == holds, path


def test_single_dash_spelling_of_the_flag(tmp_path):
    project(tmp_path, CASES["env-in-command"][0])
    r = infra("render", "stack.yaml", "-out=out", "-write-secrets", cwd=tmp_path)
    assert r.returncode == 0 and "warning[render.secret-written]" in r.stderr, r.stderr
