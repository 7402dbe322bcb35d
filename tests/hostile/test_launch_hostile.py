"""Hostile `command` values: validate reads them as a shell would and never runs, hangs or tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.knowledge.launchers import launchers
from infra_cli.stack.launch import CommandSyntaxError, parse_command, parse_steps

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
    for d in json.loads(run.stdout)["diagnostics"]:
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
    assert not [d for d in json.loads(run.stdout)["diagnostics"] if d["rule"] == "distribution.lightning-trainer"]


def test_a_hostile_conda_file_is_no_evidence_and_no_crash(tmp_path):
    """A conda file nested past the YAML parser's recursion, or not YAML at all, names no package, and is refused
    at the stack's conda_file (environment.conda-file: read under the stack loader's bounds)."""
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
    assert sorted(d["rule"] for d in json.loads(run.stdout)["diagnostics"]) == ["distribution.packages-missing"] * 2 + [
        "environment.conda-file"] * 2


@pytest.mark.parametrize("command, flag, value", [
    # a pipe, `;` and `)` inside $( ) or backticks belong to the substitution: one word to bash, not a pipeline
    ("torchrun --master_addr $(echo $AZ_BATCH_MASTER_NODE | cut -d: -f1) --master_port 6105 t.py",
     "--master_port", "6105"),
    ("torchrun --master_addr `echo $AZ_BATCH_MASTER_NODE | cut -d: -f1` --master_port 6105 t.py", "--master_port", "6105"),
    ("torchrun --master_addr=$(getent hosts $(echo $X | cut -d: -f1) | awk '{print $1}') --node_rank 0 t.py",
     "--node_rank", "0"),
    ("torchrun --master_addr \"$(a; b) x\" --master_port $((6100 + 5)) t.py", "--master_port", "$((6100 + 5))"),
    ("torchrun --master_addr $(echo ')' | tr -d ')') --master_port 1 t.py", "--master_port", "1"),
])
def test_substitutions_are_one_word(command, flag, value):
    step = parse_command(command, launchers())
    assert step.kind == "per-node" and step.options[flag] == value and step.script == "t.py", step


@pytest.mark.parametrize("command", [
    "torchrun --master_addr $(echo $X | cut -d: -f1 --master_port 6105 t.py",   # $( never closed
    "torchrun --master_addr `echo $X t.py",                                     # backtick never closed
    "python t.py --x \"$(echo \"$(date)\" \"",                                  # nested, the outer one open
    "$(" * 20_000,                                                              # deep, no recursion
], ids=["dollar-paren", "backtick", "nested-outer-open", "deep"])
def test_an_unclosed_substitution_is_a_syntax_error(command):
    with pytest.raises(CommandSyntaxError):
        parse_steps(command, launchers())


def test_deeply_nested_substitutions_parse_without_recursion():
    nested = "$(echo " * 20_000 + "x" + ")" * 20_000
    step = parse_command(f"torchrun --master_addr {nested} --master_port 1 t.py", launchers())
    assert step.options["--master_port"] == "1"


def test_a_build_context_copying_from_outside_is_not_read(tmp_path):
    """A Dockerfile that COPYs ../ or a symlink out of its context: those files are never opened as evidence."""
    (tmp_path / "ctx").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-req.txt"
    outside.write_text("deepspeed\nmpi4py\n", encoding="utf-8")
    (tmp_path / "ctx" / "requirements.txt").symlink_to(outside)
    (tmp_path / "ctx" / "Dockerfile").write_text(
        "FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest\n"
        f"COPY ../../{outside.name} requirements.txt /tmp/\n" + "RUN true \\\n" * 5000 + "\n", encoding="utf-8")
    stack = tmp_path / "stack.yaml"
    stack.write_text(HEADER.replace("environments: {env: {curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest}}",
                                    "environments: {env: {build: {path: ctx}}}")
                     + "distributions:\n  a: {cluster: gpu, environment: env, type: mpi, framework: deepspeed, "
                       "process_count_per_instance: 8}\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(stack)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    rules = [d["rule"] for d in json.loads(run.stdout)["diagnostics"]]
    assert "distribution.packages-missing" in rules and "distribution.mpi-missing" not in rules, rules
