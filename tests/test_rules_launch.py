"""The rules of infra_cli/validate/rules/launch.py (what a distribution's command launches: launchers, processes,
nodes, rendezvous, variables, Lightning, TensorFlow, transformers). Each test fails if its rule is removed."""

from __future__ import annotations

import pytest

from infra_cli.stack.load import load_stack

from rules_fixtures import A100, CURATED_ENV, PER_NODE_MPI, RENDEZVOUS, check, errors, one_distribution


def test_per_node_launcher_with_several_processes_per_node(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\n"
                                                          "launcher: per-node\nprocess_count_per_instance: 8\n"))
    r.one("distribution.per-node-launcher", "error", "process_count_per_instance: 8")


def test_per_node_launcher_with_one_process_is_clean(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\n"
                                                          "launcher: per-node\n"))
    assert r.diagnostics == []


def test_tensorflow_counts_on_another_type(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "worker_count: 2\n"))
    r.one("distribution.tensorflow-counts", "error", "worker_count: 2")


def test_tensorflow_more_tasks_than_nodes(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 2\n"
                                                          "worker_count: 3\n"))
    d = r.one("distribution.tensorflow-counts", "error", "worker_count: 3")
    assert "instance_count: 3" in d.hint


def test_tensorflow_parameter_servers_outnumbering_workers(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 4\n"
                                                          "worker_count: 2\nparameter_server_count: 2\n"))
    r.one("distribution.tensorflow-counts", "warning", "parameter_server_count: 2")


def test_tensorflow_with_process_count_per_instance(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\nprocess_count_per_instance: 8\n"))
    r.one("distribution.tensorflow-counts", "error", "process_count_per_instance: 8")


def test_transformers_per_process_needs_local_rank(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "process_count_per_instance: 8\n"
                                                          "command: python run_glue.py --fp16\n"))
    d = r.one("distribution.transformers-local-rank", "error", "python run_glue.py")
    assert "--local_rank $LOCAL_RANK" in d.hint


@pytest.mark.parametrize("dist", [
    "type: pytorch\nframework: transformers\nprocess_count_per_instance: 8\n"
    "command: python run_glue.py --local_rank $LOCAL_RANK\n",
    "type: pytorch\nframework: transformers\nprocess_count_per_instance: 8\n"
    "command: python run_glue.py --local-rank=$LOCAL_RANK\n",
    "type: pytorch\nframework: transformers\nlauncher: per-node\ncommand: torchrun --nproc_per_node 8 run_glue.py\n",
], ids=["passes-local-rank", "hyphen-spelling", "per-node"])
def test_transformers_clean(tmp_path, dist):
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, dist)).diagnostics == []


def test_disabling_infiniband_on_an_infiniband_size_warns(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                          "process_count_per_instance: 8\n"
                                                          "environment_variables: {NCCL_IB_DISABLE: 1}\n"))
    r.one("distribution.infiniband-disabled", "warning", "{NCCL_IB_DISABLE")


@pytest.mark.parametrize("kind, var, severity", [
    ("type: pytorch\nprocess_count_per_instance: 8", "RANK", "error"),
    ("type: pytorch\nprocess_count_per_instance: 8", "MASTER_PORT", "warning"),
    ("type: mpi\nprocess_count_per_instance: 8", "OMPI_COMM_WORLD_SIZE", "error"),
    ("type: tensorflow\nworker_count: 2", "TF_CONFIG", "error"),
])
def test_launcher_variables_set_by_hand(tmp_path, kind, var, severity):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"{kind}\ninstance_count: 2\n"
                                                          f"environment_variables:\n  NCCL_DEBUG: WARN\n  {var}: '1'\n"))
    d = r.one("distribution.launcher-variable", severity, var)  # points at the key
    assert f"sets {var}, which Azure ML's" in d.message and f"remove {var}" in d.hint


def test_launcher_variables_of_another_type_are_yours(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "instance_count: 2\nenvironment_variables: {TF_CONFIG: x}\n"))
    assert r.of("distribution.launcher-variable") == []


def test_command_parser_finds_the_training_step():
    from infra_cli.knowledge.launchers import launchers
    from infra_cli.stack.launch import count, parse_command, parse_steps, variables

    table = launchers()
    step = parse_command("cd src && NCCL_DEBUG=INFO OMP_NUM_THREADS=1 python -m torch.distributed.run "
                         "--nproc_per_node=8 --nnodes ${{inputs.nodes}} --node_rank \"$NODE_RANK\" "
                         "--master_addr $MASTER_ADDR --master_port $MASTER_PORT train.py --epochs 3 > log 2>&1", table)
    assert (step.kind, step.launcher.name, step.invoked_as) == ("per-node", "torchrun", "python -m torch.distributed.run")
    assert count(step.role("processes_per_node")) == 8 and count(step.role("nodes")) is None  # a placeholder
    assert variables(step.role("node_rank")) == {"NODE_RANK"} and variables("${{inputs.x}}") == set()
    assert (step.script, step.script_args) == ("train.py", ("--epochs", "3"))
    inner = parse_command("bash -c 'pip install -r req.txt; exec torchrun --nproc-per-node 4 t.py'", table)
    assert (inner.launcher.name, inner.role("processes_per_node")) == ("torchrun", "4")
    assert parse_command("mpirun -np 16 --hostfile h python train.py", table).kind == "head-node"
    assert parse_command("accelerate launch --multi_gpu --num_processes 16 t.py", table).role("processes_total") == "16"
    assert parse_command("deepspeed --hostfile hosts train.py", table).kind == "head-node"  # it ssh-es into the hosts
    assert parse_command("deepspeed --hostfile hosts --no_ssh train.py", table).kind == "per-node"
    assert [s.script for s in parse_steps("python prep.py\npython train.py --lr 1", table)] == ["prep.py", "train.py"]
    assert parse_command("python train.py --epochs ${{inputs.epochs}}", table).kind == "script"


def test_a_launcher_in_the_command_decides_the_launcher(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    assert r.diagnostics == []
    assert load_stack(tmp_path / "stack.yaml").stack.distributions["job"].launcher == "per-node"


@pytest.mark.parametrize("command, needle", [
    ("mpirun -np 16 python train.py", "16 x 16 = 256 processes"),
    ("cd src && mpiexec -n 16 python train.py", "16 x 16 = 256 processes"),
    ("horovodrun -np 16 -H localhost:8 python train.py", "16 x 16 = 256 processes"),
    ("srun python train.py", "16 copies of srun"),
])
def test_head_node_launcher_in_an_azure_ml_job(tmp_path, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: mpi\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    d = r.one("distribution.head-node-launcher", "error", f"command: {command}")
    assert needle in d.message and "python train.py" in d.hint


def test_deepspeed_with_a_hostfile_starts_every_host_itself(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                          "command: deepspeed --hostfile /job/hostfile train.py\n"))
    d = r.one("distribution.head-node-launcher", "error", "command: deepspeed")
    assert "--no_ssh" in d.hint


def test_per_node_launcher_from_the_command_with_several_processes(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 4\n"
                                                          "command: deepspeed --num_gpus 8 train.py\n"))
    d = r.one("distribution.per-node-launcher", "error", "command: deepspeed")
    assert "4 x 8 = 32 processes per node" in d.message


@pytest.mark.parametrize("command, needle", [
    (f"torchrun --nnodes 3 --nproc_per_node 8 {RENDEZVOUS} train.py", "waits for nodes that never come"),
    (f"torchrun --nnodes 1 --nproc_per_node 8 {RENDEZVOUS} train.py", "surplus nodes"),
    (f"torchrun --nproc_per_node 8 {RENDEZVOUS} train.py", "without --nnodes assumes 1 node"),
])
def test_launcher_nodes_differ_from_instance_count(tmp_path, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\ncommand: {command}\n"))
    d = r.one("distribution.launcher-nodes", "error", "command: torchrun")
    assert needle in d.message and "2" in d.hint


@pytest.mark.parametrize("kind, command, needle", [
    ("pytorch", "torchrun --nnodes 2 --nproc_per_node 8 train.py", "without --node_rank, --master_addr, --master_port"),
    ("pytorch", "torchrun --nnodes 2 --nproc_per_node 8 --node_rank 0 --master_addr $MASTER_ADDR "
                "--master_port $MASTER_PORT train.py", "the same rank"),
    ("pytorch", f"deepspeed --num_nodes 2 --num_gpus 8 {RENDEZVOUS} train.py", "needs --no_ssh"),
    ("mpi", f"torchrun --nnodes 2 --nproc_per_node 8 {RENDEZVOUS} train.py", "$NODE_RANK, which Azure ML does not set"),
])
def test_multinode_per_node_launch_needs_the_rendezvous(tmp_path, kind, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: {kind}\ninstance_count: 2\ncommand: {command}\n"))
    d = [d for d in r.of("distribution.launcher-rendezvous") if needle in d.message]
    assert len(d) == 1, r.diagnostics
    assert d[0].severity == "error" and d[0].hint and (d[0].line, d[0].column) == r.position("command: ")


@pytest.mark.parametrize("kind, command", [
    ("pytorch", f"python -m torch.distributed.launch --nproc_per_node 8 --nnodes 2 {RENDEZVOUS} --use_env train.py"),
    ("pytorch", "torchrun --nnodes 1:4 --nproc_per_node gpu --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT t.py"),
    ("pytorch", f"deepspeed --hostfile h --no_ssh --num_nodes 2 --num_gpus 8 {RENDEZVOUS} train.py"),
    ("mpi", "torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint $AZ_BATCH_MASTER_NODE t.py"),
], ids=["guide-launch", "elastic", "deepspeed-no-ssh", "mpi-per-node"])
def test_multinode_per_node_launch_done_right_is_clean(tmp_path, kind, command):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: {kind}\ninstance_count: 2\ncommand: {command}\n"))
    assert r.diagnostics == []


def test_declared_launcher_that_disagrees_with_the_command(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nlauncher: per-process\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    r.one("distribution.launcher-mismatch", "error", "command: ")


def test_a_mismatched_launcher_is_said_once_not_judged_as_per_process_too(tmp_path):
    """Transformers under torchrun declared per-process: the mismatch is the one mistake; torchrun passes the
    local rank itself, so no --local_rank error is piled on."""
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "launcher: per-process\n"
                                                          "command: torchrun --nproc_per_node 8 run_glue.py\n"))
    assert [d.rule for d in r.diagnostics] == ["distribution.launcher-mismatch"], r.diagnostics


def test_a_script_that_launches_per_node_itself_may_declare_it(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nlauncher: per-node\ninstance_count: 2\n"
                                                          "command: python launch_node.py\n"))
    assert r.diagnostics == []


def test_command_that_is_not_shell(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "command: python train.py --name \"x\n"))
    d = r.one("distribution.command-syntax", "error", "command: ")
    assert "quotation" in d.message


@pytest.mark.parametrize("dist, rule, severity, needle", [
    ("command: python train.py --trainer.num_nodes 3 --trainer.devices 8", "distribution.lightning-trainer", "error",
     "--trainer.num_nodes 3"),
    ("command: python train.py --trainer.num_nodes 2 --trainer.devices 16", "distribution.gpus-exceeded", "error",
     "--trainer.devices 16"),
    ("command: python train.py --num_nodes 2 --gpus 2", "distribution.gpus-underused", "warning", "--gpus 2"),
    ("process_count_per_instance: 8\nlauncher: per-process\ncommand: python train.py --trainer.devices 4",
     "distribution.lightning-trainer", "error", "Azure ML starts 8 processes"),
])
def test_lightning_trainer_flags(tmp_path, dist, rule, severity, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\nframework: lightning\ninstance_count: 2\n"
                                                          f"{dist}\n"))
    d = r.one(rule, severity, "command: python")
    assert needle in d.message


def test_lightning_trainer_read_from_the_script_in_code(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import lightning as L\n\ntrainer = L.Trainer(\n"
                                               "    num_nodes=4, devices=8)\n", encoding="utf-8")
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\ninstance_count: 2\n"
                                                          "command: python train.py\ncode: ./src\n"))
    d = r.one("distribution.lightning-trainer", "error", "command: python")
    assert "src/train.py:4" in d.message


@pytest.mark.parametrize("command", [
    "cd src && python run_glue.py --local_rank=$LOCAL_RANK --fp16",
    "bash -c \"python run_glue.py --local-rank $LOCAL_RANK\"",
])
def test_transformers_local_rank_read_through_the_parser(tmp_path, command):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    assert r.diagnostics == []


def test_transformers_local_rank_in_another_program_does_not_count(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "process_count_per_instance: 8\n"
                                                          "command: echo --local_rank && python run_glue.py\n"))
    r.one("distribution.transformers-local-rank", "error", "command: echo")


@pytest.mark.parametrize("nodes, workers, ps", [(2, 2, 1), (4, 4, 1), (2, 2, 0)])
def test_tensorflow_parameter_servers_share_nodes_with_workers(tmp_path, nodes, workers, ps):
    r = check(tmp_path, one_distribution(A100, "curated: azureml:AzureML-tensorflow-2.12-cuda11@latest",
                                         f"type: tensorflow\ninstance_count: {nodes}\nworker_count: {workers}\n"
                                         f"parameter_server_count: {ps}\n"))
    assert r.diagnostics == []


def test_tensorflow_fewer_workers_than_nodes_warns(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 4\nworker_count: 2\n"))
    d = r.one("distribution.tensorflow-idle-nodes", "warning", "worker_count: 2")
    assert "2 node(s) run no task" in d.message


@pytest.mark.parametrize("command", [
    PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_NODE_RANK"),
    "type: mpi\ninstance_count: 2\nlauncher: per-node\ncommand: python launch.py --node-rank=$${OMPI_COMM_WORLD_NODE_RANK}\n",
], ids=["torchrun", "own-script"])
def test_ompi_node_rank_is_not_the_node_rank_and_the_hint_fixes_it(tmp_path, command):
    # Guide 002 (cheat sheet, "Environment variables from Open MPI"): OMPI_COMM_WORLD_NODE_RANK is not the node
    # rank; with one process per node OMPI_COMM_WORLD_RANK is.
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, command, "infiniband: required", max_instances=2))
    d = r.one("distribution.node-rank-variable", "error", "command: ")
    assert "$OMPI_COMM_WORLD_RANK" in d.hint and "process_count_per_instance: 1" in d.hint
    fixed = command.replace("OMPI_COMM_WORLD_NODE_RANK", "OMPI_COMM_WORLD_RANK")
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, fixed, "infiniband: required", max_instances=2)) \
        .diagnostics == []


def test_ompi_node_rank_on_one_node_is_right_and_clean(tmp_path):
    dist = PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_NODE_RANK").replace("instance_count: 2", "instance_count: 1")
    assert not check(tmp_path, one_distribution(A100, CURATED_ENV, dist)).of("distribution.node-rank-variable")


def test_a_pipe_inside_a_substitution_keeps_the_launchers_flags(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_RANK"),
                                         "infiniband: required", max_instances=2))
    assert r.diagnostics == []


def test_tensorflow_hint_respects_max_instances(tmp_path):
    dist = "type: tensorflow\ninstance_count: 2\nworker_count: 16\n"
    d = check(tmp_path, one_distribution(A100, CURATED_ENV, dist, "infiniband: required", max_instances=2)) \
        .one("distribution.tensorflow-counts", "error", "worker_count: 16")
    assert "set worker_count: 2" in d.hint and "max_instances raised to 16" in d.hint
    for fixed, most in ((dist.replace("worker_count: 16", "worker_count: 2"), 2),
                        (dist.replace("instance_count: 2", "instance_count: 16"), 16)):
        after = check(tmp_path, one_distribution(A100, CURATED_ENV, fixed, "infiniband: required", max_instances=most))
        assert errors(after) == [], after.diagnostics


def test_the_mpi_per_node_rendezvous_hint_leads_to_a_clean_stack(tmp_path):
    dist = "type: mpi\ninstance_count: 2\nprocess_count_per_instance: 1\ncommand: torchrun --nnodes 2 --nproc_per_node 8 t.py\n"
    body = one_distribution(A100, CURATED_ENV, dist, "infiniband: required", max_instances=2)
    d = check(tmp_path, body).of("distribution.launcher-rendezvous")[0]
    assert "--rdzv_endpoint $AZ_BATCH_MASTER_NODE" in d.hint and "$OMPI_COMM_WORLD_RANK" in d.hint, d.hint
    fixed = body.replace("t.py", "--rdzv_endpoint $AZ_BATCH_MASTER_NODE --node_rank $OMPI_COMM_WORLD_RANK t.py")
    assert check(tmp_path, fixed).diagnostics == []


def test_a_multi_node_launch_without_a_distribution_type_is_told_to_take_one(tmp_path):
    """No type (issue 41): Azure ML sets no rendezvous variable, so torchrun across nodes is told to set type: pytorch,
    never "a None job"."""
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "instance_count: 2\ncommand: torchrun --nnodes 2 "
                                         "--nproc_per_node 8 --node_rank $NODE_RANK train.py\n"))
    found = r.of("distribution.launcher-rendezvous")
    assert len(found) == 2 and all("set type: pytorch" in d.hint for d in found), found
    assert "job without a distribution type" in found[1].message and "None" not in found[1].message
