"""What the issue 43 walk (a fresh clone, the README alone, a two-workspace stack with a sensitive variable, the
pre-commit hooks and the Action's scripts) met after the first fixes: each wrong turn that remained, held here."""

from __future__ import annotations

from pathlib import Path

from infra_cli.validate.engine import validate_files

MISSPELT = """\
stack: dn
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  a100: {size: SIZE, max_instances: 2, infiniband: required}
environments:
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  ddp: {cluster: a100, environment: acpt, type: pytorch, instance_count: 2, process_count_per_instance: 8}
"""


def test_a_misspelt_size_is_one_error_with_no_warnings_judging_the_misspelling(tmp_path: Path):
    # `Standard_DN96asr_v4` (two letters swapped) reads as an RDMA size by its name: beside "did you mean
    # 'Standard_ND96asr_v4'?" it got two warnings that its InfiniBand was unconfirmed, judging the typo as a size
    for size in ("Standard_DN96asr_v4", "ND96asr_v4", "Standard_ND96asrv4"):
        stack = tmp_path / "s.yaml"
        stack.write_text(MISSPELT.replace("SIZE", size))
        found = validate_files([stack])
        assert [(d.severity, d.rule) for d in found] == [("error", "cluster.size-unknown")], \
            (size, [d.format() for d in found])
        assert "did you mean 'Standard_ND96asr_v4'?" in found[0].message
    # a size the catalog does not have and that is no misspelling is still judged by its name
    stack.write_text(MISSPELT.replace("SIZE", "Standard_ND96zzr_v9"))
    assert {d.rule for d in validate_files([stack])} >= {"cluster.infiniband-unverified",
                                                         "distribution.infiniband-unverified"}


TRAIN = """\
variables:
  env: {type: string, default: staging, allowed: [staging, prod]}
  nodes: {type: number, default: 2}
stack: train-${var.env}
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  a100: {size: Standard_ND96asr_v4, max_instances: "${var.nodes}"}
"""


def test_a_var_file_with_a_misspelt_key_is_still_its_stacks_and_the_key_gets_the_did_you_mean(tmp_path: Path):
    # the hook passes only the file that changed: `node: 4` in stacks/prod.yaml was "variable.file: ... no stack
    # beside it declares all of its keys (env, node)", naming neither the key at fault nor the stack, where
    # `infra plan --var-file` says "'node' is not a variable of stacks/train.yaml" and "did you mean 'nodes'?"
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "train.yaml").write_text(TRAIN)
    (stacks / "prod.yaml").write_text("env: prod\nnode: 4\n")
    found = validate_files([stacks / "prod.yaml"])
    said = {d.rule: d for d in found}
    assert set(said) == {"variable.file-for", "variable.undeclared"}, [d.format() for d in found]
    assert said["variable.file-for"].message == f"a variables file for {stacks / 'train.yaml'}"
    undeclared = said["variable.undeclared"]
    assert (undeclared.file, undeclared.line) == (str(stacks / "prod.yaml"), 2)
    assert "'node'" in undeclared.message and "did you mean 'nodes'?" in undeclared.hint
    # its values are still judged there
    (stacks / "prod.yaml").write_text("env: production\nnode: 4\n")
    rules = {d.rule for d in validate_files([stacks / "prod.yaml"])}
    assert "variable.not-allowed" in rules and "variable.file" not in rules, rules
    # a mapping none of whose keys a stack beside it declares is still variable.file
    (stacks / "other.yaml").write_text("colour: blue\n")
    assert [d.rule for d in validate_files([stacks / "other.yaml"])] == ["variable.file"]


def test_a_destroy_with_nothing_to_destroy_says_so_not_that_the_stack_matches(tmp_path: Path):
    # `infra destroy` of a workspace whose cluster had been forgotten (`state rm`) said "No changes. Your
    # infrastructure matches the stack.": it does not, nothing of it exists. Terraform: "No objects need to be destroyed."
    import os
    import subprocess
    import sys

    stack = tmp_path / "train.yaml"
    stack.write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "INFRA_VAR_"))}
    env["INFRA_LOCAL_DIR"] = str(tmp_path / "cloud")
    for args in (("destroy", str(stack), "--local", "--auto-approve"), ("plan", str(stack), "--local", "--destroy")):
        done = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "No changes. No objects need to be destroyed." in done.stdout, (args, done.stdout)
        assert "matches the stack" not in done.stdout
    done = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", "--destroy", "--markdown"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert "no changes, no objects need to be destroyed." in done.stdout, done.stdout
