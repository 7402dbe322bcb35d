"""Hostile `command` values: validate reads them as a shell would and never runs, hangs or tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.knowledge.launchers import launchers
from infra_cli.validate.launch import CommandSyntaxError, parse_command, parse_steps

ROOT = Path(__file__).resolve().parents[2]
HEADER = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters: {gpu: {size: Standard_ND96asr_v4, max_instances: 2}}
environments: {env: {curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest}}
"""


@pytest.mark.parametrize("command", [
    "bash -c " * 50 + "torchrun t.py",                    # nesting beyond the depth bound
    "mpirun " * 5000 + "python t.py",                     # launchers nested far past the recursion limit
    "bash -c",                                            # -c with nothing after it
    ";;;&&||",                                            # separators only
    "python -m",                                          # a module flag without a module
    "torchrun --nproc_per_node",                          # a flag without its value
    "A=1 B=2 env C=3 exec",                               # prefixes, no program
    "python " + "x" * 200_000,                            # one huge word
    " ".join(["--flag v"] * 20_000),                      # many flags, no program
    "mpirun -np 99999999999999999999999 python t.py",     # a count no int32 holds
    "$(rm -rf /) && `reboot`",                            # substitutions are read, never run
])
def test_parser_survives(command):
    parse_steps(command, launchers())  # returns (its speed on these is bench/'s business, not a test's)


def test_unclosed_quote_is_a_syntax_error_not_a_crash():
    with pytest.raises(CommandSyntaxError):
        parse_command("python t.py --name 'x", launchers())


@pytest.mark.parametrize("command", [
    "\"python t.py --name 'x\"'",
    "bash -c \"" + "bash -c " * 30 + "mpirun -np 4 python t.py\"",
    "mpirun -np 99999999999999999999999 python t.py",
    "torchrun --nnodes 99999999999999999999:1 --nproc_per_node 0 t.py",
    "deepspeed --hostfile",
])
def test_validate_never_tracebacks_on_a_hostile_command(tmp_path, command):
    stack = tmp_path / "stack.yaml"
    stack.write_text(HEADER + "distributions:\n  job:\n    cluster: gpu\n    environment: env\n    type: pytorch\n"
                     "    instance_count: 2\n    command: " + json.dumps(command) + "\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(stack)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in run.stderr and run.returncode in (0, 1), run.stderr
    for d in json.loads(run.stdout):
        assert d["line"] and d["hint"], d


def test_script_outside_code_is_never_read(tmp_path):
    """A Lightning script reached through `..` or a symlink out of `code:` is not opened."""
    (tmp_path / "src").mkdir()
    secret = tmp_path.parent / f"{tmp_path.name}-outside.py"
    secret.write_text("Trainer(num_nodes=7)\n", encoding="utf-8")
    (tmp_path / "src" / "link.py").symlink_to(secret)
    stack = tmp_path / "stack.yaml"
    body = textwrap.dedent(f"""\
        distributions:
          a: {{cluster: gpu, environment: env, type: pytorch, framework: lightning, instance_count: 2,
              code: ./src, command: python ../../{secret.name}}}
          b: {{cluster: gpu, environment: env, type: pytorch, framework: lightning, instance_count: 2,
              code: ./src, command: python link.py}}
        """)
    stack.write_text(HEADER + body, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(stack)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in run.stderr
    assert not [d for d in json.loads(run.stdout) if d["rule"] == "distribution.lightning-trainer"]


def test_a_hostile_conda_file_is_no_evidence_and_no_crash(tmp_path):
    """A conda file nested past the YAML parser's recursion, or not YAML at all, names no package."""
    (tmp_path / "deep.yml").write_text("dependencies: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    (tmp_path / "bin.yml").write_bytes(b"\x00\xff" * 1000)
    stack = tmp_path / "stack.yaml"
    stack.write_text(HEADER.replace("environments: {env: {curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest}}",
                                    "environments:\n  deep: {image: x.azurecr.io/t:1, conda_file: deep.yml, requires: [openmpi]}\n"
                                    "  bin: {image: x.azurecr.io/t:1, conda_file: bin.yml, requires: [openmpi]}")
                     + "distributions:\n"
                     "  a: {cluster: gpu, environment: deep, type: mpi, framework: horovod, process_count_per_instance: 8}\n"
                     "  b: {cluster: gpu, environment: bin, type: mpi, framework: horovod, process_count_per_instance: 8}\n",
                     encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(stack)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    assert [d["rule"] for d in json.loads(run.stdout)] == ["distribution.packages-missing"] * 2
