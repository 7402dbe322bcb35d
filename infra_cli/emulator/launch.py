"""How Azure ML launches a command job's processes, as data: one Launch per process (or one mpirun).

Pure functions of the job's spec: the distribution decides the process count and the variables each
process gets, exactly those Azure ML sets (https://learn.microsoft.com/azure/machine-learning/how-to-train-distributed-gpu):
- PyTorch: MASTER_ADDR, MASTER_PORT (6105 by default), WORLD_SIZE, NODE_RANK per node, RANK and
  LOCAL_RANK per process; nothing torchrun alone sets (GROUP_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_*).
- MPI: a real `mpirun` over a host list of the emulated nodes, so Open MPI itself sets OMPI_COMM_WORLD_*
  (LOCAL_RANK 0..ppn-1 on each node, NODE_RANK by Open MPI's own meaning), plus AZ_BATCH_MASTER_NODE
  ("addr:port", several nodes) or AZ_BATCHAI_MPI_MASTER_NODE (one node). No NODE_RANK: Azure ML sets none.
- TensorFlow: TF_CONFIG.
- Ray: `ray start --head` before the command, which runs on the first node only, with RAY_ADDRESS; on this one
  machine one Ray node stands for the job's nodes (Azure ML starts `ray start --address` on every other node).
  Where `ray` is not on PATH the command runs without a cluster, as it would in an image without Ray, and says so.
Each emulated node has its own working directory holding a copy of the code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# Azure ML's MASTER_PORT unless the job sets its own (the guides above: "Azure ML sets MASTER_PORT to 6105").
AZUREML_MASTER_PORT = 6105
MASTER_ADDR = "127.0.0.1"
# Files the MPI launch needs, relative to the job's working directory (written by the runner).
MPI_HOSTFILE = "mpi/hostfile"
MPI_NODE_AGENT = "mpi/node-agent.sh"

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
    files: tuple[tuple[Path, str, int], ...] = ()   # (path, text, mode) to write before it starts
    scratch: tuple[Path, ...] = ()      # directories it may create outside the job's own, removed after it


def node_dir(workdir: Path, node: int) -> Path:
    return workdir / f"node-{node}"


def node_hostname(spec: JobSpec, node: int) -> str:
    """A distinct host name per node, as each Azure ML node has its own (never resolved: see _node_agent)."""
    return f"{spec.compute}-node-{node}"


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
        s.bind((MASTER_ADDR, 0))
        return s.getsockname()[1]


def _log_name(rank: int, total: int) -> str:
    return "user_logs/std_log.txt" if total == 1 else f"user_logs/std_log_process_{rank}.txt"


def plan_launches(spec: JobSpec, workdir: Path, logs_dir: Path, *, mpirun: str | None = None,
                  master_port: int = AZUREML_MASTER_PORT) -> list[Launch]:
    """logs_dir: the folder that holds "user_logs/" (ranks under mpirun write their logs there).
    master_port: the rendezvous port (Azure ML's 6105 unless the runner must avoid a clash on this machine)."""
    dist = spec.distribution or {}
    kind = (dist.get("distributionType") or "").lower()
    nodes = spec.instance_count
    ppn = int(dist.get("processCountPerInstance") or 1)
    if kind == "pytorch":
        return _pytorch(spec, workdir, nodes, ppn, master_port)
    if kind == "mpi":
        if mpirun:
            return [_mpirun(spec, workdir, logs_dir, nodes, ppn, mpirun, master_port)]
        return _mpi_without_mpirun(spec, workdir, nodes, ppn, master_port)
    if kind == "tensorflow":
        return _tensorflow(spec, workdir, nodes, int(dist.get("workerCount") or nodes),
                           int(dist.get("parameterServerCount") or 0))
    if kind == "ray":
        return [_ray(spec, workdir, dist, master_port)]
    # No distribution: Azure ML runs the command once on every node.
    return [_process(spec, workdir, n, {}, _log_name(n, nodes)) for n in range(nodes)]


# The head node's start, the command, and the stop, as one shell program: $1 the head's port, $2 the command, $3...
# the head node's own arguments (each one word, never parsed by this shell). A job whose image has no `ray` runs the
# command alone, which finds no cluster (the smoke's preflight says what is missing).
_RAY_HEAD = """\
port="$1"; command="$2"; shift 2
if command -v ray >/dev/null 2>&1; then
  if ray start --head --port="$port" --include-dashboard=false --disable-usage-stats "$@"; then
    started=1; export RAY_ADDRESS="127.0.0.1:$port"
  fi
else
  echo "infra emulator: ray is not on PATH: the job's Ray cluster was not started" >&2
fi
sh -c "$command"; status=$?
if [ -n "$started" ]; then ray stop --force >/dev/null 2>&1; fi
exit $status
"""


def _ray(spec: JobSpec, workdir: Path, dist: dict, port: int) -> Launch:
    """Azure ML's ray distribution on one machine: the head node's Ray (on a free port: the job's own `port` may be
    taken here; the dashboard off, it needs ray[default]), then the command on the first node."""
    here = node_dir(workdir, 0)
    try:
        head_args = shlex.split(str(dist.get("headNodeAdditionalArgs") or ""))
    except ValueError:   # an unclosed quote: passed as the one word it is (ray start refuses it, as on Azure)
        head_args = [str(dist["headNodeAdditionalArgs"])]
    argv = ["sh", "-c", _RAY_HEAD, "ray-head", str(port), resolve_command(spec, here), *head_args]
    return Launch(argv, _node_env(spec, 0), here, _log_name(0, 1))


def _node_env(spec: JobSpec, node: int) -> dict[str, str]:
    return {"AZUREML_NODE_HOSTNAME": node_hostname(spec, node), "AZUREML_CR_NODE_RANK": str(node)}


def _process(spec: JobSpec, workdir: Path, node: int, env: dict[str, str], log: str) -> Launch:
    """One process of the job's command on an emulated node: in the node's directory, with its variables."""
    here = node_dir(workdir, node)
    return Launch(["sh", "-c", resolve_command(spec, here)], {**_node_env(spec, node), **env}, here, log)


# The variables of one rank: (node, local rank, rank, world size) -> environment.
RankVariables = Callable[[int, int, int, int], dict[str, str]]


def _every_rank(spec: JobSpec, workdir: Path, nodes: int, ppn: int, variables: RankVariables) -> list[Launch]:
    """Azure ML starts each of the ppn processes of every node itself; ranks are numbered node by node."""
    world = nodes * ppn
    return [_process(spec, workdir, node, variables(node, local, node * ppn + local, world),
                     _log_name(node * ppn + local, world))
            for node in range(nodes) for local in range(ppn)]


def _pytorch(spec: JobSpec, workdir: Path, nodes: int, ppn: int, port: int) -> list[Launch]:
    return _every_rank(spec, workdir, nodes, ppn, lambda node, local, rank, world: {
        "MASTER_ADDR": MASTER_ADDR, "MASTER_PORT": str(port), "WORLD_SIZE": str(world), "RANK": str(rank),
        "LOCAL_RANK": str(local), "NODE_RANK": str(node)})


def _mpi_master(nodes: int, port: int) -> dict[str, str]:
    # Several nodes: "addr:port" of the first node; one node: its address alone (the guides' MPI section).
    return {"AZ_BATCH_MASTER_NODE": f"{MASTER_ADDR}:{port}"} if nodes > 1 else {"AZ_BATCHAI_MPI_MASTER_NODE": MASTER_ADDR}


def mpi_session_base(workdir: Path) -> Path:
    return Path(tempfile.gettempdir()) / f"infra-ompi-{hashlib.sha256(str(workdir).encode()).hexdigest()[:12]}"


def _node_agent(spec: JobSpec, nodes: int, workdir: Path, mpirun: str) -> str:
    """Open MPI starts its daemon on every host of the host list through its remote shell (plm_rsh_agent).
    The emulated nodes are this machine, so this "ssh" runs the daemon here, with the node's own
    variables; Open MPI still sees one host per node and numbers local ranks per node itself."""
    cases = "\n".join(f"  {shlex.quote(node_hostname(spec, n))}) node={n} ;;" for n in range(nodes))
    # Each node's daemon keeps its Open MPI session directory apart: on one machine they (and mpirun) would
    # all create /tmp/ompi.HOST.UID/jf.N at once, and Open MPI 4.1 fails a daemon whose mkdir loses that
    # race ("Directory: .../jf.N Error: File exists", orte_session_dir failed). Short, under the temporary
    # directory: Open MPI puts unix sockets there, whose paths are limited to 108 bytes.
    session_base = shlex.quote(str(mpi_session_base(workdir)))
    # mpirun runs with --noprefix (see _mpirun), so the ranks keep the job's PATH: the daemon Open MPI names
    # (orted; prted from Open MPI 5) is run from mpirun's own folder, never another one the job's PATH puts
    # first, and its libraries are found after the job's.
    bin_dir = os.path.dirname(os.path.abspath(mpirun))
    mpi_bin, mpi_lib = shlex.quote(bin_dir), shlex.quote(os.path.join(os.path.dirname(bin_dir), "lib"))
    return f"""#!/bin/sh
# Written by infra's local emulator: the remote shell Open MPI uses to start its daemon on an emulated node.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
case "$1" in
{cases}
  *) echo "infra emulator: no emulated node named $1" >&2; exit 255 ;;
esac
export AZUREML_NODE_HOSTNAME="$1" AZUREML_CR_NODE_RANK="$node"
export OMPI_MCA_orte_tmpdir_base={session_base}/node-"$node"
export LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}}"{mpi_lib}
shift
daemon="$*"
daemon="${{daemon#"${{daemon%%[! ]*}}"}}"
case "$daemon" in orted\\ *|prted\\ *) daemon={mpi_bin}/"$daemon" ;; esac
exec /bin/sh -c "$daemon"
"""


def _mpirun(spec: JobSpec, workdir: Path, logs_dir: Path, nodes: int, ppn: int, mpirun: str, port: int) -> Launch:
    world = nodes * ppn
    command = resolve_command(spec, node_dir(workdir, 0))
    for n in range(1, nodes):
        resolve_command(spec, node_dir(workdir, n))     # each node's outputs/ folders
    logs = logs_dir / "user_logs"
    # Each rank runs in its node's directory (AZUREML_CR_NODE_RANK comes from the node agent) and writes
    # its own log, as Azure ML's std_log_process_N.txt.
    script = (f'cd {shlex.quote(str(workdir))}/node-"$AZUREML_CR_NODE_RANK" && exec sh -c {shlex.quote(command)} '
              f'> {shlex.quote(str(logs))}/std_log_process_"$OMPI_COMM_WORLD_RANK".txt 2>&1')
    hostfile = "".join(f"{node_hostname(spec, n)} slots={ppn}\n" for n in range(nodes))
    env = {**_mpi_master(nodes, port),
           # The emulated nodes share this machine and its host name: ranks talk over TCP on loopback as
           # separate hosts would over their network, and each node's daemon keeps its hardware topology to
           # itself (shared memory segments are named after the host, so two emulated nodes would collide in
           # them: a crash in hwloc_shmem_topology_write, or in the vader BTL); ranks are not bound to cores.
           "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_rtc_hwloc_vmhole": "none",
           "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_hwloc_base_binding_policy": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1",
           # The hostfile gives each emulated node the stack's slots, so Open MPI believes no core is shared
           # and a waiting rank spins on its progress loop: here all ranks share this machine's few cores, and
           # a spinning rank takes the core the rank it waits for needs. Idle ranks yield it instead.
           "OMPI_MCA_mpi_yield_when_idle": "1"}
    # Azure ML runs the job as root and passes --allow-run-as-root to its own mpirun; so does the emulator.
    # --noprefix: mpirun started by its full path otherwise prefixes the remote daemon's command with
    # PATH=<its folder>:$PATH, so every rank would see /usr/bin (or Open MPI's prefix) ahead of the job's PATH
    # and run another python, ninja or compiler than the job's other launchers do (on Azure ML one image
    # serves every launcher). DeepSpeed's JIT ops, built with /usr/bin's ninja under mpirun and with the
    # job's ninja elsewhere, were rebuilt at every switch.
    argv = [mpirun, "--allow-run-as-root", "--noprefix", "-np", str(world), "--hostfile", str(workdir / MPI_HOSTFILE),
            "--mca", "plm_rsh_agent", str(workdir / MPI_NODE_AGENT), "sh", "-c", script]
    return Launch(argv, env, workdir, "system_logs/mpirun.txt",
                  tuple(f"user_logs/std_log_process_{r}.txt" for r in range(world)),
                  ((workdir / MPI_HOSTFILE, hostfile, 0o644), (workdir / MPI_NODE_AGENT, _node_agent(spec, nodes, workdir, mpirun), 0o755)),
                  scratch=(mpi_session_base(workdir),))


def _mpi_without_mpirun(spec: JobSpec, workdir: Path, nodes: int, ppn: int, port: int) -> list[Launch]:
    # Without Open MPI the ranks still get the variables mpirun would give them (no MPI transport).
    # Open MPI's NODE_RANK is the process's rank among those of the job on its node (not the node's index).
    return _every_rank(spec, workdir, nodes, ppn, lambda node, local, rank, world: {
        **_mpi_master(nodes, port), "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(ppn),
        "OMPI_COMM_WORLD_NODE_RANK": str(local)})


def _tensorflow(spec: JobSpec, workdir: Path, nodes: int, workers: int, ps: int) -> list[Launch]:
    # Every task listens on its own port: here the tasks of all nodes share one address.
    worker_hosts = [f"{MASTER_ADDR}:{free_port()}" for _ in range(workers)]
    ps_hosts = [f"{MASTER_ADDR}:{free_port()}" for _ in range(ps)]
    cluster = {"worker": worker_hosts, **({"ps": ps_hosts} if ps else {})}
    tasks = [("worker", i) for i in range(workers)] + [("ps", i) for i in range(ps)]
    launches = []
    for index, (task_type, task_index) in enumerate(tasks):
        node = index % nodes
        tf_config = {"cluster": cluster, "task": {"type": task_type, "index": task_index}, "environment": "cloud"}
        log = (f"user_logs/std_log_{task_type}_{task_index}.txt" if task_type == "ps"
               else _log_name(task_index, len(tasks)))
        launches.append(_process(spec, workdir, node, {"TF_CONFIG": json.dumps(tf_config)}, log))
    return launches


def find_mpirun() -> str | None:
    return shutil.which("mpirun")
