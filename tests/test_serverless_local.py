"""Serverless distributions and computes infra does not manage on the local Azure (the emulator, through the real
SDKs): a serverless distribution plans (no cluster to create), applies and smokes on the emulator's serverless
compute (a job submitted with no compute); a compute named by `compute: azureml:NAME` is read live by plan, a
missing one a plan error naming how to create or attach it, and apply never creates or deletes it."""

from __future__ import annotations

import json


from test_smoke_frameworks import TWO_GPU_SIZE, assert_passed, infra, need, smoke, write_stack

SERVERLESS = {"environment": "acpt", "type": "pytorch", "process_count_per_instance": 2,
              "resources": {"instance_type": TWO_GPU_SIZE}, "queue_settings": {"job_tier": "standard"}}


def _plan(stack, state) -> dict:
    r = infra("plan", str(stack), "--local", "--json", state=state)
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def test_a_serverless_distribution_plans_no_cluster(tmp_path):
    stack = write_stack(tmp_path / "stack.yaml", "serverless-plan", {}, {"ddp": SERVERLESS})
    plan = _plan(stack, tmp_path)
    assert not [c for c in plan["resource_changes"] if c["type"] == "cluster"]
    assert plan["smoke_jobs"] == ["smoke.ddp"]
    assert not [d for d in plan["diagnostics"] if d["severity"] == "error"], plan["diagnostics"]


def test_a_serverless_size_the_region_does_not_offer_is_a_plan_error(tmp_path):
    dist = {**SERVERLESS, "resources": {"instance_type": "Standard_ZZ8s_v9"}, "process_count_per_instance": 1}
    stack = write_stack(tmp_path / "stack.yaml", "serverless-size", {}, {"ddp": dist})
    plan = _plan(stack, tmp_path)
    found = [d for d in plan["diagnostics"] if d["rule"] == "preflight.size-unavailable"]
    assert found and "serverless size Standard_ZZ8s_v9" in found[0]["message"], plan["diagnostics"]


def test_a_serverless_distribution_applies_and_smokes_on_serverless_compute(tmp_path):
    need("torch")
    stack = write_stack(tmp_path / "stack.yaml", "serverless-smoke", {}, {"ddp": SERVERLESS})
    got = assert_passed(smoke(stack, tmp_path)["ddp"])
    assert "instance_count 1 x 2 processes per node" in got["check.world_size"][0][1]


def test_a_compute_infra_does_not_manage_is_read_live_and_never_created(tmp_path):
    dist = {"compute": "azureml:k8s-gpu", "environment": "acpt", "command": "python train.py"}
    stack = write_stack(tmp_path / "stack.yaml", "attached", {}, {"job": dist})
    plan = _plan(stack, tmp_path)
    missing = [d for d in plan["diagnostics"] if d["rule"] == "plan.compute-missing"]
    assert missing and missing[0]["severity"] == "error" and "az ml compute attach" in missing[0]["hint"]
    assert "'k8s-gpu'" in missing[0]["message"] and missing[0]["line"]
    assert plan["resource_changes"] == [] or all(c["type"] != "cluster" for c in plan["resource_changes"])
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=tmp_path)
    assert applied.returncode != 0 and "k8s-gpu" in applied.stdout + applied.stderr
    # made elsewhere (another stack's cluster, under the name the job gives): read, named, left alone
    other = write_stack(tmp_path / "other.yaml", "elsewhere", {"k8s-gpu": {"size": TWO_GPU_SIZE, "max_instances": 1}},
                        {})
    made = infra("apply", str(other), "--auto-approve", "--local", "--no-smoke", state=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    plan = _plan(stack, tmp_path)
    read = [d for d in plan["diagnostics"] if d["rule"] == "plan.compute-read"]
    assert read and f"an AmlCompute cluster of {TWO_GPU_SIZE}".lower() in read[0]["message"].lower(), plan["diagnostics"]
    assert not [d for d in plan["diagnostics"] if d["severity"] == "error"]
    applied = infra("apply", str(stack), "--auto-approve", "--local", "--no-smoke", state=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    destroyed = infra("destroy", str(stack), "--auto-approve", "--local", state=tmp_path)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    still = _plan(stack, tmp_path)
    assert [d for d in still["diagnostics"] if d["rule"] == "plan.compute-read"]   # destroy left it there


def test_a_smoke_on_a_missing_compute_says_so_before_submitting(tmp_path):
    dist = {"compute": "azureml:k8s-gpu", "environment": "acpt", "type": "pytorch"}
    stack = write_stack(tmp_path / "stack.yaml", "attached-smoke", {}, {"job": dist})
    r = infra("smoke", str(stack), "--local", state=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    out = r.stdout + r.stderr
    assert "compute 'k8s-gpu' does not exist" in out and "az ml compute attach" in out, out


def test_the_size_plan_reads_of_a_compute_is_judged_as_a_clusters(tmp_path):
    """validate says nothing of a compute's size (it cannot know it); plan reads it and judges it by the same
    rules: 8 processes per node on a size of 2 GPUs is distribution.gpus-exceeded, naming the compute."""
    other = write_stack(tmp_path / "other.yaml", "elsewhere", {"made-elsewhere": {"size": TWO_GPU_SIZE,
                                                                                "max_instances": 2}}, {})
    made = infra("apply", str(other), "--auto-approve", "--local", "--no-smoke", state=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    dist = {"compute": "azureml:made-elsewhere", "environment": "acpt", "type": "pytorch",
            "process_count_per_instance": 8}
    stack = write_stack(tmp_path / "stack.yaml", "attached-size", {}, {"job": dist})
    assert infra("validate", str(stack), state=tmp_path).returncode == 0
    plan = _plan(stack, tmp_path)
    found = [d for d in plan["diagnostics"] if d["rule"] == "distribution.gpus-exceeded"]
    assert len(found) == 1 and found[0]["severity"] == "error" and "2 GPU(s)" in found[0]["message"], plan
    fixed = write_stack(tmp_path / "stack.yaml", "attached-size", {}, {"job": {**dist, "process_count_per_instance": 2}})
    assert not [d for d in _plan(fixed, tmp_path)["diagnostics"] if d["severity"] == "error"]


def test_a_kubernetes_compute_attached_elsewhere_is_read_runs_the_smoke_and_is_left_alone(tmp_path):
    """`az ml compute attach --type Kubernetes` (azure-ai-ml's KubernetesCompute) on the local Azure, then a stack
    whose job names it: plan reads it as a Kubernetes compute, apply and destroy leave it, and the smoke job runs
    on it."""
    need("torch")
    from azure.ai.ml.entities import KubernetesCompute

    from emulator_fixtures import start_emulator
    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    server = start_emulator(tmp_path / "local")
    try:
        ml = build_clients(Workspace(subscription_id="00000000-0000-0000-0000-000000000000", resource_group="rg-test",
                                     name="mlw-test", location="eastus"), local=True, emulator=server).ml
        arc = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-test/providers/"
               "Microsoft.Kubernetes/connectedClusters/arc-gpu")
        ml.compute.begin_create_or_update(KubernetesCompute(name="k8s-gpu", resource_id=arc, namespace="train")).result()
    finally:
        server.stop()
    dist = {"compute": "azureml:k8s-gpu", "environment": "acpt",
            "command": "torchrun --standalone --nproc_per_node 1 train.py"}
    stack = write_stack(tmp_path / "stack.yaml", "attached-k8s", {}, {"single": dist})
    plan = _plan(stack, tmp_path)
    read = [d for d in plan["diagnostics"] if d["rule"] == "plan.compute-read"]
    assert read and "a Kubernetes compute, read live" in read[0]["message"], plan["diagnostics"]
    assert not [d for d in plan["diagnostics"] if d["severity"] == "error"]
    got = assert_passed(smoke(stack, tmp_path)["single"])
    assert "instance_count 1" in got["check.world_size"][0][1]
    destroyed = infra("destroy", str(stack), "--auto-approve", "--local", state=tmp_path)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert [d for d in _plan(stack, tmp_path)["diagnostics"] if d["rule"] == "plan.compute-read"]


def test_a_serverless_job_of_a_retired_size_is_a_plan_error(tmp_path):
    """cluster.size-retired is judged live for clusters (one that exists keeps its nodes); a serverless job has no
    node yet, so plan refuses a retired instance_type as validate does (Learn's 4 x Standard_NC24 example)."""
    dist = {"environment": "acpt", "command": "echo hello", "instance_count": 4,
            "resources": {"instance_type": "Standard_NC24"}}
    stack = write_stack(tmp_path / "stack.yaml", "serverless-retired", {}, {"job": dist})
    plan = _plan(stack, tmp_path)
    found = [d for d in plan["diagnostics"] if d["rule"] == "cluster.size-retired"]
    assert len(found) == 1 and found[0]["severity"] == "error" and "Standard_NC24" in found[0]["message"], plan
