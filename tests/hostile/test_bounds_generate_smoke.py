"""Bounds where input enters (issue 40): what Azure or a job hands back is read under the same bounds as a stack.

- `plan --generate-config-out` of a live environment whose recorded conda file is a few hundred bytes of nested
  YAML aliases expanded it whole (plan read it through yaml.safe_load, and generate copied every alias): the
  recorded conda file is read as the stack loader reads a conda file (plan/live.py recorded_conda), and one over
  its bounds is left out with a note saying why.
- A smoke job's outputs/ holding links: the emulator followed them (a link to /etc/passwd uploaded this machine's
  file, one to 1.5 GiB read it whole) and azure-ai-ml's download read every blob whole into memory (22.9 GB):
  the emulator uploads regular files reached through no link, each and all under a cap, and names what it left
  out in the job's system log; infra downloads each blob streamed to a new file, one over its cap left out (a
  log's tail kept), nothing past a total; `infra smoke` says what was left out, one line each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from emulator_fixtures import WORKSPACE_YAML

from infra_cli.azure.jobs import LOG_TAIL_BYTES
from infra_cli.azure.provider import AzureProvider
from infra_cli.conventions import OUTPUTS_LEFT_OUT_LOG
from infra_cli.emulator.runner import MAX_OUTPUT_FILE_BYTES
from infra_cli.plan.kinds.environment import recorded_conda, recorded_content_hash
from infra_cli.smoke.run import fetch_outputs
from infra_cli.smoke.spec import RESULT_FILE

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"


def cli(*args: str, emulator, state: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """infra on the running `emulator`, or (None) on the in-process one of `--local` over `state`."""
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_EMULATOR_URL")}
    env.update(INFRA_LOCAL_DIR=str(state), **({"INFRA_EMULATOR_URL": emulator.url} if emulator else {}))
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=timeout, check=False)
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
    assert recorded_conda("  # nothing\n") == (None, "it is empty")
    assert recorded_conda("- a\n") == (None, "it is a list")
    assert recorded_conda("name: x\nv: !!python/name:os.system\n")[0] is None   # no tag but YAML's core ones


# ---- a smoke job's outputs -----------------------------------------------------------------------------------

BIG = 3 << 30   # sparse: no disk used, and never read

PLANT = """
import json, os, sys
out = "outputs"
os.makedirs(out, exist_ok=True)
big = sys.argv[1]
with open(big, "wb") as fh:
    fh.truncate({big})
os.symlink(big, os.path.join(out, "big.bin"))
os.symlink("/etc/passwd", os.path.join(out, "passwd"))
os.symlink("/etc", os.path.join(out, "etc"))
with open(os.path.join(out, "sparse.bin"), "wb") as fh:
    fh.truncate({over})
with open(os.path.join(out, "medium.bin"), "wb") as fh:
    fh.write(b"m" * (3 << 20))
json.dump({{"ok": True}}, open(os.path.join(out, "{result}"), "w"))
for i in range(40000):
    print(f"log line {{i:06d}} " + "x" * 60)
print("the last line", flush=True)
""".format(big=BIG, over=MAX_OUTPUT_FILE_BYTES + 1, result=RESULT_FILE)


def _planted_job(clients, tmp_path, script: str = PLANT) -> str:
    from azure.ai.ml import command
    from azure.ai.ml.entities import AmlCompute, Environment

    clients.ml.compute.begin_create_or_update(AmlCompute(name="cpu", size="Standard_ND96asr_v4",
                                                         max_instances=1)).result()
    clients.ml.environments.create_or_update(Environment(name="runtime", version="1", image=IMAGE))
    code = tmp_path / "code"
    code.mkdir()
    (code / "plant.py").write_text(script)
    job = command(code=str(code), command=f"python plant.py {tmp_path / 'big-target.bin'}",
                  environment="runtime:1", compute="cpu", instance_count=1)
    name = clients.ml.jobs.create_or_update(job).name
    clients.ml.jobs.stream(name)
    assert clients.ml.jobs.get(name).status == "Completed"
    return name


@pytest.mark.runs_jobs   # a job on the emulator (tests/conftest.py schedules these first)
def test_a_smoke_job_s_linked_and_oversized_outputs_are_never_followed_nor_read_whole(tmp_path, clients, emulator,
                                                                                      capsys):
    name = _planted_job(clients, tmp_path)
    capsys.readouterr()
    into = tmp_path / "download"
    outputs = fetch_outputs(AzureProvider(clients), name, into, max_file_bytes=1 << 20)
    assert outputs.result == {"ok": True} and outputs.why_no_result is None, (outputs.why_no_result, outputs.left_out)
    got = into / "artifacts" / "outputs"
    # only the regular files under the caps came back: no link, nothing of /etc, nothing of the sparse files
    assert sorted(p.name for p in got.iterdir()) == [RESULT_FILE], sorted(p.name for p in got.iterdir())
    everything = [p for p in into.rglob("*")]
    assert not any(p.is_symlink() for p in everything)
    passwd = Path("/etc/passwd").read_bytes()[:64]
    assert not any(p.is_file() and passwd in p.read_bytes() for p in everything)
    left_out = "\n".join(outputs.left_out)
    # the emulator's side: links named with their targets, never followed; a file over its cap not read
    assert f"outputs/big.bin (node 0): a symbolic link (to {tmp_path / 'big-target.bin'}): links are never " \
           "followed: not uploaded" in left_out, left_out
    assert "outputs/passwd (node 0): a symbolic link (to /etc/passwd): links are never followed: not uploaded" \
           in left_out, left_out
    assert "outputs/etc (node 0): a symbolic link (to /etc): links are never followed" in left_out, left_out
    assert (f"outputs/sparse.bin (node 0): {MAX_OUTPUT_FILE_BYTES + 1} bytes, over the 64 MiB a file of a job's "
            "outputs may be here: not uploaded") in left_out, left_out
    # infra's side: a file over the download cap is left out; a log over it is kept by its tail, all that is read
    assert (f"outputs/medium.bin: {3 << 20} bytes, over the 1 MiB infra downloads of a job's file: not "
            "downloaded") in left_out, left_out
    log = into / "artifacts" / "user_logs" / "std_log.txt"
    assert log.stat().st_size == LOG_TAIL_BYTES and log.read_text().endswith("the last line\n")
    assert OUTPUTS_LEFT_OUT_LOG in outputs.logs


@pytest.mark.runs_jobs   # a job on the emulator (tests/conftest.py schedules these first)
def test_a_job_s_download_stops_at_its_total(tmp_path, clients, emulator):
    name = _planted_job(clients, tmp_path)
    outputs = fetch_outputs(AzureProvider(clients), name, tmp_path / "download", max_bytes=1 << 20)
    assert any("past the 1 MiB infra downloads of a job in all: not downloaded" in line for line in
               outputs.left_out), outputs.left_out
    assert sum(p.stat().st_size for p in (tmp_path / "download").rglob("*") if p.is_file()) <= 1 << 20


SITECUSTOMIZE = """
import os
# run by every Python process of the job (PYTHONPATH names this folder): what a job's own code may leave in outputs/
if os.environ.get("INFRA_EMULATED_NODE") and os.path.isdir("outputs"):
    for name, target in (("big.bin", {big!r}), ("passwd", "/etc/passwd")):
        try:
            os.symlink(target, os.path.join("outputs", name))
        except FileExistsError:
            pass
"""


CAPPED = """
import os, shutil, sys
os.makedirs("outputs", exist_ok=True)
for name, size in (("a.bin", 600 << 10), ("b.bin", 600 << 10), ("c.bin", 2 << 20)):
    with open(os.path.join("outputs", name), "wb") as fh:
        fh.write(b"x" * size)
with open(os.path.join("outputs", "{result}"), "w") as fh:
    fh.write("[" * 100000 + "]" * 100000)
""".format(result=RESULT_FILE)


@pytest.mark.runs_jobs   # a job on the emulator (tests/conftest.py schedules these first)
def test_the_emulator_uploads_each_output_and_all_of_them_under_its_caps(tmp_path, clients, emulator):
    runner = emulator.backend.runner
    runner.max_output_file_bytes, runner.max_output_bytes = 1 << 20, 1 << 20
    name = _planted_job(clients, tmp_path, CAPPED)
    outputs = fetch_outputs(AzureProvider(clients), name, tmp_path / "download")
    got = tmp_path / "download" / "artifacts" / "outputs"
    assert sorted(p.name for p in got.iterdir()) == ["a.bin", RESULT_FILE], sorted(p.name for p in got.iterdir())
    assert outputs.left_out == [
        "outputs/b.bin (node 0): the job's outputs are past 1 MiB in all: not uploaded",
        (f"outputs/c.bin (node 0): {2 << 20} bytes, over the 1 MiB a file of a job's outputs may be here: not "
         "uploaded")], outputs.left_out
    # a result nested past the JSON parser's depth is no result, said, never a traceback
    assert outputs.result is None and outputs.why_no_result == (
        f"{RESULT_FILE} of job {name} is not JSON: nested too deep"), outputs.why_no_result


@pytest.mark.runs_jobs   # a job on the emulator (tests/conftest.py schedules these first)
def test_outputs_replaced_by_a_link_are_not_followed(tmp_path, clients, emulator):
    script = 'import os, shutil\nshutil.rmtree("outputs", ignore_errors=True)\nos.symlink("/etc", "outputs")\n'
    name = _planted_job(clients, tmp_path, script)
    outputs = fetch_outputs(AzureProvider(clients), name, tmp_path / "download")
    assert outputs.left_out == [
        "outputs/ (node 0): a symbolic link (to /etc): links are never followed: not uploaded"], outputs.left_out
    assert not (tmp_path / "download" / "artifacts" / "outputs").exists()


@pytest.mark.runs_jobs   # a job on the emulator (tests/conftest.py schedules these first)
def test_infra_smoke_says_which_outputs_it_left_out_and_still_judges(tmp_path):
    """`infra smoke --local` of a job whose outputs/ holds a link to a 3 GiB file and one to /etc/passwd: neither is
    followed, the smoke names both (as warnings) and still judges the job by its result."""
    big = tmp_path / "big-target.bin"
    with open(big, "wb") as fh:
        fh.truncate(BIG)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(SITECUSTOMIZE.format(big=str(big)))
    text = (ROOT / "stacks" / "ib-a100.yaml").read_text()
    text = text.replace("process_count_per_instance: 8", "process_count_per_instance: 1").replace(
        "    smoke:\n", f"    environment_variables: {{PYTHONPATH: {planted}}}\n    smoke:\n")
    stack = tmp_path / "linked.yaml"
    stack.write_text(text)
    state = tmp_path / "state"
    applied = cli("apply", str(stack), "--auto-approve", "--local", "--no-smoke", emulator=None, state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    r = cli("smoke", str(stack), "--local", emulator=None, state=state)
    out = r.stdout + r.stderr
    assert "smoke.ddp: warning: 4 of job " in out and "'s outputs left out (a link is never followed, a file over " \
        "infra's bound is never read):" in out, out
    for node in (0, 1):
        assert f"  outputs/big.bin (node {node}): a symbolic link (to {big}): links are never followed: not " \
               "uploaded" in out, out
        assert f"  outputs/passwd (node {node}): a symbolic link (to /etc/passwd): links are never followed: not " \
               "uploaded" in out, out
    assert "smoke.ddp: PASSED" in out and r.returncode == 0, out
    assert Path("/etc/passwd").read_text()[:40] not in out
