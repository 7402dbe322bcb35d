"""The example policies of docs/examples/policy/ (issue 44), each run by `infra plan --policy FILE` on the local
Azure against a stack made to pass it and one made to fail it; and all of them together, as a team's `policy/`
folder, on a stack that meets every one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "policy"


def stack(*, workspace: str = "mlw-prod", size: str = "Standard_ND96asr_v4", max_instances: int = 2,
          infiniband: str | None = "required", tier: str = "dedicated", nodes: int = 2,
          tags: str = "{owner: ml-platform, cost-center: cc-42}") -> str:
    ib = f"\n    infiniband: {infiniband}" if infiniband else ""
    return f"""stack: example
workspace: {{subscription_id: {TEST_SUBSCRIPTION}, resource_group: {TEST_RESOURCE_GROUP}, name: {workspace}, location: {TEST_LOCATION}}}
clusters:
  train:
    size: {size}
    tier: {tier}
    max_instances: {max_instances}{ib}
    tags: {tags}
environments:
  pytorch:
    curated: azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest
distributions:
  ddp:
    cluster: train
    environment: pytorch
    type: pytorch
    instance_count: {nodes}
    process_count_per_instance: {8 if size.startswith('Standard_ND96') else 1}
"""


# example file -> (a stack that passes it, a stack that fails it, what the failure says)
CASES = {
    "infiniband_in_prod.rego": (stack(), stack(infiniband=None),
                                "distribution.ddp runs on 2 nodes of cluster.train (Standard_ND96asr_v4) in production "
                                "workspace mlw-prod: the cluster must say `infiniband: required`"),
    "allowed_sizes.rego": (stack(), stack(size="Standard_NC24ads_A100_v4", infiniband=None, nodes=1),
                           "cluster.train: size Standard_NC24ads_A100_v4 is not allowed in workspace mlw-prod"),
    "max_instances.rego": (stack(max_instances=8), stack(size="Standard_NC4as_T4_v3", max_instances=9, nodes=1,
                                                         infiniband=None),
                           "cluster.train asks for max_instances 9: more than 8 nodes needs a review"),
    "dev_low_priority.rego": (stack(workspace="mlw-dev", tier="low_priority"), stack(workspace="mlw-dev"),
                              "cluster.train is dedicated in dev workspace mlw-dev: dev clusters use "
                              "`tier: low_priority`"),
    "required_tags.rego": (stack(), stack(tags="{team: ml}"),
                           "cluster.train has no `owner` tag: add `tags: {owner: TEAM}` to the cluster"),
    "cost_ceiling.rego": (stack(), stack(max_instances=8),
                          "the stack's clusters would cost 217.58 USD/hour at max_instances, over the ceiling of 200"),
}


def plan(folder: Path, text: str, *policy: str) -> subprocess.CompletedProcess:
    (folder / "stack.yaml").write_text(text)
    return subprocess.run([sys.executable, "-m", "infra_cli", "plan", "stack.yaml", "--local", *policy],
                          capture_output=True, text=True, cwd=folder, timeout=300,
                          env={**os.environ, "INFRA_LOCAL_DIR": str(folder / "state")})


def test_every_example_has_its_cases():
    assert sorted(p.name for p in EXAMPLES.glob("*.rego")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_example_passes_and_fails_the_stacks_made_for_it(tmp_path, name):
    passing, failing, says = CASES[name]
    policy = str(EXAMPLES / name)
    ok = plan(tmp_path, passing, "--policy", policy)
    assert ok.returncode == 0, ok.stderr
    assert "error[policy." not in ok.stderr, ok.stderr
    refused = plan(tmp_path, failing, "--policy", policy)
    assert refused.returncode == 1, refused.stderr
    assert f"error[policy.main.deny]: {says}" in refused.stderr, refused.stderr
    assert f"{policy}:" in refused.stderr   # the policy file, at its rule's line
    errors = [line for line in refused.stderr.splitlines() if "error[" in line]
    assert all("error[policy.main.deny]" in line for line in errors), errors   # the stack is fine but for the policy


def test_all_examples_together_as_a_policy_folder(tmp_path):
    folder = tmp_path / "policy"
    folder.mkdir()
    for source in EXAMPLES.glob("*.rego"):
        (folder / source.name).write_text(source.read_text())
    done = plan(tmp_path, stack(), )   # no flag: the project's policy/ folder
    assert done.returncode == 0 and "error[" not in done.stderr, done.stderr
    failing = plan(tmp_path, stack(infiniband=None, tags="{team: ml}", max_instances=9))
    rules = sorted({line.split("error[")[1].split("]")[0] for line in failing.stderr.splitlines() if "error[policy" in line})
    assert failing.returncode == 1 and rules == ["policy.main.deny"], failing.stderr
    assert failing.stderr.count("error[policy.main.deny]") == 4, failing.stderr   # IB, nodes, owner, cost


def test_a_destroy_plan_of_a_stack_the_examples_would_refuse_is_not_refused(tmp_path):
    """The examples judge what a plan creates or changes: `plan --destroy` of a stack that breaks them all, its
    policy/ folder applying, is no error (the InfiniBand rule, which reads the configuration, asks for the mode)."""
    folder = tmp_path / "policy"
    folder.mkdir()
    for source in EXAMPLES.glob("*.rego"):
        (folder / source.name).write_text(source.read_text())
    broken = stack(infiniband=None, tags="{team: ml}", max_instances=9)
    assert plan(tmp_path, broken).returncode == 1
    destroyed = plan(tmp_path, broken, "--destroy")
    assert destroyed.returncode == 0 and "error[policy" not in destroyed.stderr, destroyed.stderr
