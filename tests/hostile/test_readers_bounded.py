"""Every reader linear and bounded (issue 31): the attacks of the third hostile review, each kept as a test.

- A Dockerfile's scan copied the rest of a RUN line for each `pip install` in it (96 KB kept validate busy past
  30 s): the work it does is counted here, in Python lines run, for a file and one four times its size.
- A conda file of YAML aliases was walked whole: it is read under the stack loader's bounds and refused, located.
- A build context's files were read whole into memory for their hash (2.1 GB for a 2 GB file): hashed in chunks,
  memory measured with tracemalloc; a context over Azure ML's snapshot limit is a warning.
- A plan file nested 900 deep with its digest recomputed was a RecursionError: refused by its depth, key or not.
- A full disk was "internal error: OperationalError" or "OSError: File too large" without the file: simulated
  with a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored, so a write past it fails with EFBIG).
- `infra skus --location nowhere` exited 0 without --local.

No assertion on wall time: work is counted (lines run, bytes allocated), and subprocess timeouts only stop a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from infra_cli.plan.kinds import environment
from infra_cli.plan.planfile import MAX_PLAN_DEPTH, content_digest, content_hmac
from infra_cli.plan.model import FORMAT_VERSION
from infra_cli.validate import dockerfile
from infra_cli.validate.dockerfile import read_dockerfile

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ("workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
             "name: mlw-training, location: eastus}\n")
STACK = f"""stack: readers
{WORKSPACE}clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 2}}
environments:
  env: ENV
distributions:
  job: {{cluster: gpu, environment: env, type: mpi, process_count_per_instance: 8, instance_count: 2}}
"""
BASE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04"


def cli(*args: str, cwd: Path = ROOT, env: dict | None = None, file_size_limit: int | None = None,
        timeout: int = 300) -> subprocess.CompletedProcess:
    def limited() -> None:   # a write past the limit fails with EFBIG, as on a full disk, instead of killing
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    full_env = {k: v for k, v in os.environ.items() if k not in ("INFRA_PLAN_KEY", "AZUREML_CURRENT_CLOUD")}
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=cwd,
                       env=full_env, timeout=timeout, preexec_fn=limited if file_size_limit else None)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def diagnostics_of(stdout: str) -> list[dict]:
    data = json.loads(stdout)   # `validate --json`: the diagnostics (in Terraform's object, or a list)
    return data["diagnostics"] if isinstance(data, dict) else data


def stack_with(tmp_path: Path, env: str) -> Path:
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("ENV", env))
    return path


# ---- Dockerfiles -----------------------------------------------------------------------------------------

class CountingWords(list):
    """The words of an instruction, counting each word handed out: by index, in a slice, or by iteration."""

    touched = 0

    def __getitem__(self, index):
        got = super().__getitem__(index)
        CountingWords.touched += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self):
        for w in super().__iter__():
            CountingWords.touched += 1
            yield w


def work(text: str, monkeypatch) -> int:
    """The scan's work on `text`: Python lines run inside infra_cli/validate/dockerfile.py, plus every word it
    reads again (a slice of the rest of a line copies each word in it)."""
    words = dockerfile._words
    monkeypatch.setattr(dockerfile, "_words", lambda arguments: CountingWords(words(arguments)))
    CountingWords.touched = 0
    count = 0
    own = dockerfile.__file__

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename != own:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        read_dockerfile(text)
    finally:
        sys.settrace(None)
        monkeypatch.setattr(dockerfile, "_words", words)
    return count + CountingWords.touched


SHAPES = {
    # one RUN, `pip install` after `pip install` with no separator: each used to rescan the rest of the line
    "no separators": lambda n: f"FROM {BASE}\nRUN " + " ".join(["pip install torch"] * n) + "\n",
    # one RUN of `&&`-joined installs: each used to copy the rest of the line's words
    "one long RUN": lambda n: f"FROM {BASE}\nRUN " + " && ".join(["pip install torch"] * n) + "\n",
    # backslash continuations joined into one instruction
    "continued lines": lambda n: f"FROM {BASE}\nRUN true \\\n" + "  && pip install numpy \\\n" * n + "  && true\n",
    # flags before an exec-form array: each used to split off the rest of the text
    "many flags": lambda n: f"FROM {BASE}\nCOPY " + "--chown=1:1 " * n + '["conda.yml", "/tmp/"]\n',
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_dockerfiles_scan_is_linear_in_its_size(shape, monkeypatch):
    make = SHAPES[shape]
    small, large = work(make(500), monkeypatch), work(make(2000), monkeypatch)
    assert large <= 4.5 * small, (shape, small, large)   # quadratic would be 16x


def test_the_scan_still_finds_what_the_dockerfile_installs():
    facts = read_dockerfile(SHAPES["no separators"](3))
    assert facts.pip_installs == ("torch", "torch", "torch") and facts.base_image == BASE
    assert read_dockerfile(SHAPES["many flags"](3)).copied == ("conda.yml",)
    assert read_dockerfile(SHAPES["continued lines"](2)).pip_installs == ("numpy", "numpy")


def test_validate_reads_a_1_mb_dockerfile_to_a_verdict(tmp_path):
    """Each shape at 250 KB (quadratic, the string copies of one of them alone took minutes)."""
    (tmp_path / "ctx").mkdir()
    text = "".join(make(250_000 // (len(make(2)) - len(make(1))))[len(f"FROM {BASE}\n"):] for make in SHAPES.values())
    (tmp_path / "ctx" / "Dockerfile").write_text(f"FROM {BASE}\n" + text)
    assert len(text) > 900_000
    r = cli("validate", str(stack_with(tmp_path, "{build: {path: ctx}}")), timeout=120)
    assert r.returncode in (0, 1) and "stack file(s)" in r.stderr, r.stderr


def test_a_requirement_spec_of_blanks_is_refused_in_one_pass(tmp_path):
    """`requires: ["a<500,000 blanks>!"]`: the spec's regex tried every split of the blanks between two `\\s*`."""
    stack = stack_with(tmp_path, f"{{image: {BASE}, requires: ['a{' ' * 500_000}!']}}")
    r = cli("validate", str(stack), timeout=120)
    assert r.returncode == 1 and "is not a requirement spec" in r.stderr and "(500002 characters)" in r.stderr
    assert len(r.stderr) < 2000


# ---- conda files -----------------------------------------------------------------------------------------

LAUGHS = ("name: x\na0: &a0 [" + ", ".join(["numpy"] * 10) + "]\n"
          + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 40))
          + "dependencies:\n  - python=3.10\n  - pip: *a39\n")


def test_a_conda_file_of_aliases_is_refused_at_its_line(tmp_path):
    (tmp_path / "conda.yml").write_text(LAUGHS)
    assert len(LAUGHS) < 4000
    stack = stack_with(tmp_path, f"{{image: {BASE}, conda_file: conda.yml}}")
    r = cli("validate", "--json", str(stack), timeout=120)
    assert r.returncode == 1
    found = [d for d in diagnostics_of(r.stdout) if d["rule"] == "environment.conda-file"]
    assert len(found) == 1 and found[0]["line"] == 6, found
    assert "more than 100000 values" in found[0]["message"] and f"{tmp_path / 'conda.yml'}:2:" in found[0]["message"]


# ---- build contexts --------------------------------------------------------------------------------------

def test_a_context_is_hashed_in_chunks_whatever_its_files_size(tmp_path):
    (tmp_path / "Dockerfile").write_text(f"FROM {BASE}\n")
    with open(tmp_path / "big.bin", "wb") as fh:
        fh.truncate(64 << 20)   # 64 MiB, sparse
    tracemalloc.start()
    try:
        digest = environment._tree_sha256(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak   # read whole, it was the file's 64 MiB
    expected = hashlib.sha256(b"Dockerfile\0" + f"FROM {BASE}\n".encode() + b"big.bin\0")
    expected.update(b"\0" * (64 << 20))   # the digest is what it always was: paths and bytes, in order
    assert digest == expected.hexdigest()


def test_a_context_over_azure_mls_snapshot_limit_is_a_warning(tmp_path):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(f"FROM {BASE}\n")
    with open(tmp_path / "ctx" / "data.bin", "wb") as fh:
        fh.truncate(400 * 10**6)   # sparse: counted as what would be uploaded
    r = cli("validate", "--json", str(stack_with(tmp_path, "{build: {path: ctx}}")))
    assert r.returncode == 0, r.stdout
    found = [d for d in diagnostics_of(r.stdout) if d["rule"] == "paths.context-large"]
    assert len(found) == 1 and found[0]["severity"] == "warning" and found[0]["line"] == 6, found
    assert "300 MB" in found[0]["message"] and "learn.microsoft.com" in found[0]["message"]
    (tmp_path / "ctx" / "data.bin").unlink()
    r = cli("validate", "--json", str(stack_with(tmp_path, "{build: {path: ctx}}")))
    assert "paths.context-large" not in r.stdout


# ---- plan files ------------------------------------------------------------------------------------------

def nested_plan(depth: int, key: bytes | None) -> dict:
    deep: object = "bottom"
    for _ in range(depth):
        deep = {"x": deep}
    body = {"kind": "infra-plan", "format_version": FORMAT_VERSION, "stack": "readers", "mode": "normal",
            "resource_changes": [], "live_fingerprint": "x", "stack_path": "stack.yaml", "targets": [],
            "desired": [], "diagnostics": [], "smoke_jobs": [], "deep": deep}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10 * depth + limit)   # the attacker's own tools recompute the seals
    try:
        body["digest"] = content_digest(body)
        if key is not None:
            body["hmac"] = content_hmac(body, key)
        body["text"] = json.dumps(body)
    finally:
        sys.setrecursionlimit(limit)
    return body


@pytest.mark.parametrize("key", [None, "a-plan-key"])
def test_a_plan_file_nested_900_deep_is_refused_by_its_depth(tmp_path, key):
    path = tmp_path / "deep.plan"
    path.write_text(nested_plan(900, key.encode() if key else None)["text"])
    env = {"INFRA_PLAN_KEY": key} if key else {}
    for args in (("show", str(path)), ("apply", str(path), "--auto-approve", "--local")):
        r = cli(*args, env={**env, "INFRA_LOCAL_DIR": str(tmp_path / "local")})
        assert r.returncode == 1, r.stderr
        assert f"nested more than {MAX_PLAN_DEPTH} levels deep" in r.stderr, r.stderr


def test_a_plan_file_just_within_the_depth_reads_on_to_its_seals(tmp_path):
    """A plan file nested exactly MAX_PLAN_DEPTH deep is read on past its seals (refused only later, for the
    fields this forged body lacks); one level more is refused by its depth."""
    # the plan's own object is level 1, nested_plan's n objects under "deep" levels 2 to n + 1
    at_bound, one_over = tmp_path / "at.plan", tmp_path / "over.plan"
    at_bound.write_text(nested_plan(MAX_PLAN_DEPTH - 1, None)["text"])
    one_over.write_text(nested_plan(MAX_PLAN_DEPTH, None)["text"])
    r = cli("show", str(at_bound))
    assert r.returncode == 1 and "nested more than" not in r.stderr, r.stderr   # the depth is not what refuses it
    assert "plan file is missing 'workspace'" in r.stderr, r.stderr   # its seals held: read on to its fields
    r = cli("show", str(one_over))
    assert r.returncode == 1 and f"nested more than {MAX_PLAN_DEPTH} levels deep" in r.stderr, r.stderr


# ---- a full disk -----------------------------------------------------------------------------------------

def test_a_plan_file_that_does_not_fit_leaves_the_old_one_and_names_it(tmp_path):
    stack = (ROOT / "stacks" / "ib-a100.yaml").read_text()
    stack = stack.replace("description: A100 training cluster", "description: " + "x" * 150_000, 1)
    assert "x" * 150_000 in stack
    (tmp_path / "s.yaml").write_text(stack)
    env = {"INFRA_LOCAL_DIR": str(tmp_path / "local")}
    assert cli("plan", str(tmp_path / "s.yaml"), "--local", env=env).returncode == 0   # the state, before the limit
    out = tmp_path / "p.plan"
    out.write_text("the previous plan")
    r = cli("plan", str(tmp_path / "s.yaml"), "--local", "--out", str(out), env=env, file_size_limit=100_000)
    assert r.returncode == 1
    assert "planfile.unwritten" in r.stderr and str(out) in r.stderr and "nothing was written" in r.stderr, r.stderr
    assert out.read_text() == "the previous plan" and sorted(p.name for p in tmp_path.iterdir()) == [
        "local", "p.plan", "s.yaml"]   # no temporary file left beside it


def test_a_state_database_that_cannot_grow_is_rolled_back_and_named(tmp_path):
    env = {"INFRA_LOCAL_DIR": str(tmp_path / "local")}
    stack = ROOT / "stacks" / "ib-a100.yaml"
    assert cli("plan", str(stack), "--local", env=env).returncode == 0
    r = cli("apply", str(stack), "--local", "--auto-approve", env=env, file_size_limit=30_000)
    assert r.returncode == 1
    assert "local.state-unwritable" in r.stderr and "state.sqlite3" in r.stderr and "rolled back" in r.stderr, r.stderr
    db = sqlite3.connect(tmp_path / "local" / "state.sqlite3")
    try:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        assert [t for (t,) in db.execute("SELECT type FROM resources")] == ["workspace"]   # nothing half-applied
    finally:
        db.close()


# ---- skus ------------------------------------------------------------------------------------------------

def test_skus_with_an_unknown_location_exits_1_without_local():
    r = cli("skus", "--location", "nowhere")
    assert r.returncode == 1 and "skus.unknown-location" in r.stderr, r.stderr
    assert cli("skus", "--location", "eastus").returncode == 0
