"""Issue 40's test of done for secrets: one stack with sensitive values in every place the stack language takes
them (a cluster's and an environment's description and tags, a sensitive map given whole as a job's
environment_variables, a job's command and an input's SAS URL, an output, a registry, `${ENV}` values, a
variable's default built from `${ENV}`), run through validate, plan (text, --json, --markdown, --out), show, graph,
render, apply --local (and the smoke job it runs), smoke --report, output, state list and a stale plan's hint; every artifact and every output is searched for the clear values and
for their unsalted SHA-256. Azure itself (the local cloud's database) must hold them: the request body is the one
place a secret goes in clear."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.runs_jobs   # apply runs the smoke job on the emulator: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent.parent

TOKEN = "Tok3n-7c1f9e-everywhere"
MAP_SECRET = "MapS3cret-4a2b88"
ENV_SECRET = "EnvS3cret-91d0aa"
DEFAULT_SECRET = "DefS3cret-55e3c1"
REGISTRY_SECRET = "regs3cret4711"
CLEAR = (TOKEN, MAP_SECRET, ENV_SECRET, DEFAULT_SECRET)

STACK = textwrap.dedent("""\
    variables:
      token: {type: string, sensitive: true}
      envmap: {type: map, sensitive: true}
      reg: {type: string, sensitive: true, default: azureml}
      pin: {type: string, default: "pin-${DEFAULT_SECRET}"}
      env: {type: string, default: prod}
    stack: everywhere
    workspace:
      subscription_id: 00000000-0000-0000-0000-0000000000e1
      resource_group: rg-${var.env}
      name: mlw-everywhere
      location: eastus
    clusters:
      gpu:
        size: Standard_ND96asr_v4
        max_instances: 1
        description: "gpu of ${var.token}"
        tags:
          owner: "team-${var.token}"
          envtag: "${ENV_SECRET}"
          pin: "${var.pin}"
    environments:
      acpt:
        curated: azureml://registries/${var.reg}/environments/AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu/labels/latest
      custom:
        image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest
        description: "custom image, ${var.token}"
        tags: {key: "${ENV_SECRET}"}
    distributions:
      ddp:
        cluster: gpu
        environment: acpt
        type: pytorch
        instance_count: 1
        process_count_per_instance: 1
        environment_variables: ${var.envmap}
        command: "python train.py --token ${var.token}"
        inputs:
          data:
            type: uri_folder
            path: "https://acct.blob.core.windows.net/c/d?sig=${var.token}"
    outputs:
      secret_out:
        value: "${cluster.gpu.name}-${var.token}"
        sensitive: true
      plain:
        value: "${cluster.gpu.name}"
      hidden:   # sensitive by its declaration alone: no secret in it
        value: "${cluster.gpu.size}-${cluster.gpu.location}"
        sensitive: true
    """)


def needles() -> list[str]:
    """Each clear value, and its SHA-256 (whole, and the 16 hex a fast content hash keeps)."""
    out = list(CLEAR)
    for clear in CLEAR:
        digest = hashlib.sha256(clear.encode()).hexdigest()
        out += [digest, digest[:16]]
    return out


def infra(*args: str, state: Path, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_VAR_")}
    environ.update({"INFRA_LOCAL_DIR": str(state), "INFRA_VAR_envmap": json.dumps({"API_KEY": MAP_SECRET}),
                    "ENV_SECRET": ENV_SECRET, "DEFAULT_SECRET": DEFAULT_SECRET, **(env or {})})
    environ.pop("INFRA_PLAN_KEY", None)
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=environ,
                          cwd=cwd, timeout=300)


def leaks(text: str) -> list[str]:
    return [n for n in needles() if n in text]


def test_no_secret_in_any_artifact_or_output_of_a_whole_run(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    state, plan_file = tmp_path / "state", tmp_path / "everywhere.plan"
    given = ("--var", f"token={TOKEN}", "--var", "env=prod")   # on the command line, as a hint could echo them
    runs: dict[str, subprocess.CompletedProcess] = {}

    def run(label: str, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        r = runs[label] = infra(*args, state=state, cwd=tmp_path, env={"INFRA_VAR_token": TOKEN})
        assert r.returncode in ok, f"{label}: {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    run("validate", "validate", str(stack), *given)
    run("validate --json", "validate", str(stack), "--json", *given)
    run("plan", "plan", str(stack), "--local", *given)
    plan_json = run("plan --json", "plan", str(stack), "--json", "--local", *given)
    run("plan --out", "plan", str(stack), "--local", "--out", str(plan_file), *given)
    run("show PLANFILE", "show", str(plan_file))   # a saved plan takes no --var: the secret from INFRA_VAR_token
    run("show PLANFILE --json", "show", str(plan_file), "--json")
    run("show PLANFILE --markdown", "show", str(plan_file), "--markdown")
    run("plan --markdown", "plan", str(stack), "--local", "--markdown", *given)
    run("graph", "graph", str(stack), *given)
    run("render (refuses the job files that would hold secrets)", "render", str(stack), "--out",
        str(tmp_path / "rendered"), *given, ok=(1,))
    apply = run("apply PLANFILE", "apply", str(plan_file), "--local")
    run("smoke --json", "smoke", str(stack), "--local", "--json", "--report", str(tmp_path / "report"), *given)
    run("output", "output", str(stack), "--local", *given)
    run("output --json", "output", str(stack), "--json", "--local", *given)
    run("state list", "state", "list", str(stack), "--local", *given)
    run("show STACK --json", "show", str(stack), "--json", "--local", *given)
    again = run("plan again", "plan", str(stack), "--local", "--detailed-exitcode", *given)
    stale = run("apply the applied plan", "apply", str(plan_file), "--local", ok=(1,))
    named = infra("output", str(stack), "secret_out", "--local", *given, state=state, cwd=tmp_path)
    nope = infra("output", str(stack), "nope", "--local", *given, state=state, cwd=tmp_path)

    # a secret compares with what Azure reads back by its clear value: nothing to change, no drift
    assert "No changes." in again.stdout, again.stdout
    # what each step says holds the secrets' places, redacted
    assert "Apply complete! Resources: 2 added" in apply.stdout and "secret_out = <sensitive>" in apply.stdout
    assert "smoke.ddp: PASSED" in apply.stdout, apply.stdout
    document = json.loads(plan_json.stdout)
    assert document["output_changes"]["secret_out"] == {"after": None, "after_unknown": False,
                                                       "after_sensitive": True}
    assert document["output_changes"]["hidden"] == {"after": None, "after_unknown": False, "after_sensitive": True}
    assert "Standard_ND96asr_v4-eastus" not in plan_json.stdout   # a sensitive output's value, never in plan JSON
    (acpt_read,) = [c for c in document["resource_changes"] if c["address"] == "environment.acpt"]
    assert {k: acpt_read["change"]["after"][k] for k in ("curated", "resolved")} == {
        "curated": "(sensitive value)", "resolved": "(sensitive value)"}   # both name the sensitive registry
    assert "(reads environment.acpt: (sensitive value))" in runs["plan"].stdout, runs["plan"].stdout
    (gpu,) = [c for c in document["resource_changes"] if c["address"] == "cluster.gpu"]
    assert gpu["change"]["after"]["description"] == "(sensitive value)"
    assert set(gpu["change"]["after"]["tags"].values()) == {"(sensitive value)"}
    saved = json.loads(plan_file.read_text())
    (desired,) = [r for r in saved["desired"] if r["address"] == "cluster.gpu"]
    assert desired["attributes"]["description"].startswith("(sensitive value) scrypt:")   # a keyed digest
    assert saved["variables"]["token"]["digest"].startswith("(sensitive value) scrypt:")
    # the registry a sensitive variable names inside a curated reference (a field kept as text): sealed as well
    (acpt,) = [r for r in saved["desired"] if r["address"] == "environment.acpt"]
    (read,) = [c for c in saved["resource_changes"] if c["address"] == "environment.acpt"]
    assert acpt["attributes"]["curated"].startswith("(sensitive value) scrypt:"), acpt
    assert all(read["change"]["after"][k].startswith("(sensitive value) scrypt:") for k in ("curated", "resolved"))
    # the stale plan's hint gives the plan's values again, but not a sensitive one
    assert "error[apply.stale-plan]" in stale.stderr, stale.stderr
    assert "--var env=prod" in stale.stderr and "token=" not in stale.stderr, stale.stderr
    # asked for by name, a sensitive output is shown (Terraform's `output NAME`)
    assert named.returncode == 0 and named.stdout.strip() == f'"gpu-{TOKEN}"', named.stdout + named.stderr
    # an output the stack does not declare, after apply: a clear error (exit 1), never an internal error
    assert nope.returncode == 1 and "error[output.not-found]: the stack has no output 'nope'" in nope.stderr, \
        nope.stdout + nope.stderr
    assert "internal error" not in nope.stderr and "secret_out" in nope.stderr   # the hint lists the declared ones

    artifacts = {label: r.stdout + r.stderr for label, r in runs.items()}
    artifacts["plan file"] = plan_file.read_text()
    for path in [*(tmp_path / "report").rglob("*"), *(tmp_path / "rendered").rglob("*")]:
        if path.is_file():
            artifacts[str(path)] = path.read_bytes().decode("utf-8", "replace")
    for path in state.rglob("*"):   # what infra keeps beside the local cloud (not the cloud's own database)
        if path.is_file() and not path.name.startswith("state.sqlite3") and "bin" not in path.parts:
            artifacts[str(path)] = path.read_bytes().decode("utf-8", "replace")
    found = {label: leaks(text) for label, text in artifacts.items() if leaks(text)}
    assert not found, found

    # the request bodies carried them: Azure (the local cloud) holds the clear description, tags and version
    with sqlite3.connect(state / "state.sqlite3") as db:
        stored = "\n".join(str(row) for table, in db.execute("select name from sqlite_master where type='table'")
                           for row in db.execute(f"select * from {table}"))
    assert f"gpu of {TOKEN}" in stored and f"team-{TOKEN}" in stored and ENV_SECRET in stored
    assert f"pin-{DEFAULT_SECRET}" in stored and f"custom image, {TOKEN}" in stored
    assert MAP_SECRET in stored   # the smoke job's environment variables, as its request sent them


def test_a_sensitive_registry_is_in_no_diagnostic_of_validate_or_plan(tmp_path):
    """The registry a curated reference names through a sensitive variable: validate's text and JSON and plan's
    error (the registry does not exist) say "(sensitive value)"."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK.replace("type: pytorch", "type: mpi\n    framework: horovod")
                     .replace("AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu", "their-env"))
    env = {"INFRA_VAR_reg": REGISTRY_SECRET, "INFRA_VAR_token": TOKEN}
    state = tmp_path / "state"
    text = infra("validate", str(stack), state=state, cwd=tmp_path, env=env)
    as_json = infra("validate", str(stack), "--json", state=state, cwd=tmp_path, env=env)
    plan = infra("plan", str(stack), "--local", state=state, cwd=tmp_path, env=env)
    plan_json = infra("plan", str(stack), "--local", "--json", state=state, cwd=tmp_path, env=env)
    assert text.returncode == 0 and "curated environment '(sensitive value)'" in text.stderr, text.stderr
    assert json.loads(as_json.stdout)["warning_count"] >= 1
    for r in (text, as_json, plan, plan_json):
        assert REGISTRY_SECRET not in r.stdout + r.stderr and not leaks(r.stdout + r.stderr), r.stdout + r.stderr
