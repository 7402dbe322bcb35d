"""Rules on what a distribution's command launches (validators/launchers.yaml): the launcher it starts against
the one declared, its processes, nodes and rendezvous, the variables it reads, and what frameworks (Lightning,
TensorFlow, transformers) need of the launch."""

from __future__ import annotations

import re
from typing import Iterator

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.frameworks import FrameworkInfo, launcher_variables, node_rank_variables
from infra_cli.knowledge.launchers import launchers
from infra_cli.paths import inside, project_root
from infra_cli.stack.launch import Launch, count, variables
from infra_cli.stack.model import Distribution
from infra_cli.stack.secret import revealed
from infra_cli.validate.rules.carries import project_text
from infra_cli.validate.rules.distributions import GPUS_EXCEEDED, GPUS_UNDERUSED
from infra_cli.validate.rules.command import diagnostic_at_command, launched_per_node, launches_of, parsed_command, training_launch
from infra_cli.validate.rules.registry import Context, declare, rule, rule_for_each


def tasks_per_node(dist: Distribution) -> int:
    return dist.processes_per_instance if dist.type != "tensorflow" else 1


def _per_node_processes(step: Launch, dist: Distribution, gpus: int) -> tuple[int | None, str]:
    """How many processes the per-node launcher starts on each node, and the flag that says so."""
    spec = step.spec
    value = step.role("processes_per_node")
    if value is not None:
        flag = next(f for f in spec.flags["processes_per_node"] if f in step.options)
        return (gpus if value.strip().lower() in ("gpu", "auto") else count(value)), f"{flag} {value}"
    total = step.role("processes_total")
    if total is not None:
        # each copy of the launcher spreads --num_processes over the machines it is told of (accelerate: 1 unless
        # --num_machines says otherwise), not over the job's nodes
        nodes = count(step.role("nodes")) or spec.nodes_default or dist.instance_count
        flag = spec.flags["processes_total"][0]
        per = count(total)
        return (per // nodes if per is not None and per % nodes == 0 else None), f"{flag} {total} over {nodes} node(s)"
    if spec.processes_default == "all_gpus":
        return gpus, f"{step.invoked_as} (one process per GPU by default)"
    if isinstance(spec.processes_default, int):
        return spec.processes_default, f"{step.invoked_as} without {spec.flags['processes_per_node'][0]} " \
                                       f"(default {spec.processes_default})"
    return None, ""


COMMAND_SYNTAX = declare("distribution.command-syntax", "error", "a distribution's command is not valid shell")


@rule_for_each("distributions", COMMAND_SYNTAX)
def distribution_command_syntax(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    error = parsed_command(dist.command)[1] if dist.command else None
    if error:
        yield diagnostic_at_command(ctx, name, COMMAND_SYNTAX.id,
                          f"the command of distribution {name!r} is not valid shell ({error})",
                          "close the quote or escape the character; Azure ML runs the command with bash")


HEAD_NODE_LAUNCHER = declare(
    "distribution.head-node-launcher", "error",
    "the command starts a head-node launcher (mpirun, a hostfile) inside a job Azure ML already launches")


@rule(HEAD_NODE_LAUNCHER)
def distribution_head_node_launcher(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in launches_of(ctx, "head-node"):
        if dist.type in (None, "ray"):
            continue   # Azure ML starts the command once (no distribution: on one node; ray: on the head node)
        nodes, per = dist.instance_count, tasks_per_node(dist)
        started = nodes * per
        script = step.script or "train.py"
        if step.spec.kind == "per-node":   # deepspeed --hostfile: it ssh-es into every host itself
            flag = next(f for f in step.spec.head_node_flags if f in step.options)
            yield diagnostic_at_command(
                ctx, name, HEAD_NODE_LAUNCHER.id,
                f"{step.invoked_as} {flag} starts the processes of every host itself (over ssh), but Azure ML runs the "
                f"command {started} time(s) ({per} on each of {nodes} node(s)): each copy would start the whole job",
                f"run it once per node: {step.invoked_as} {' '.join(step.spec.per_node_flags)} --node_rank $NODE_RANK "
                f"--master_addr $MASTER_ADDR --master_port $MASTER_PORT ... with process_count_per_instance: 1 "
                f"({step.spec.source.split(' ')[0]})")
            continue
        np = count(step.role("processes"))
        result = (f"{started} x {np} = {started * np} processes" if np else
                  f"{started} copies of {step.invoked_as}, each starting its own set of ranks")
        yield diagnostic_at_command(
            ctx, name, HEAD_NODE_LAUNCHER.id,
            f"the command starts {step.invoked_as}{f' -np {np}' if np else ''}, a head-node launcher, inside an "
            f"Azure ML {dist.type} job that already starts {per} process(es) on each of {nodes} node(s): {result}",
            f"Azure ML builds the launch itself (mpirun for type mpi): drop `{step.invoked_as} ...` and write "
            f"`command: python {script} ...`; set instance_count and process_count_per_instance (one per GPU) instead")


PER_NODE_LAUNCHER = declare("distribution.per-node-launcher", "error",
                            "a per-node launcher is started several times per node (process_count_per_instance > 1)")


@rule_for_each("distributions", PER_NODE_LAUNCHER)
def distribution_launcher(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    if dist.launcher != "per-node" or dist.processes_per_instance <= 1 or dist.type == "tensorflow":
        return
    step = training_launch(dist)
    sku = ctx.dist_sku(dist)
    gpus = sku.gpus if sku else 0
    if step is not None and step.kind == "per-node":
        each, _ = _per_node_processes(step, dist, gpus)
        what = step.invoked_as
    else:
        each, what = (gpus or None), (f"{dist.framework} (a per-node launcher)" if dist.framework else
                                      "the per-node launcher")
    ppi = dist.processes_per_instance
    result = f"{ppi} x {each} = {ppi * each} processes per node" if each else f"{ppi} launchers per node"
    if each and sku and sku.gpus:
        result += f" for {sku.gpus} GPUs"
    message = (f"distribution {name!r} runs {what}, which starts the processes of its node itself; "
               f"process_count_per_instance {ppi} starts it {ppi} times on each node: {result}")
    hint = "remove process_count_per_instance (or set it to 1): the launcher starts one process per GPU"
    if dist.command and step is not None:
        yield diagnostic_at_command(ctx, name, PER_NODE_LAUNCHER.id, message, hint)
    else:
        yield ctx.at(("distributions", name, "process_count_per_instance"), PER_NODE_LAUNCHER.id,
                     message, hint)


LAUNCHER_MISMATCH = declare("distribution.launcher-mismatch", "error",
                            "the declared launcher disagrees with the per-node launcher the command starts")


@rule(LAUNCHER_MISMATCH)
def distribution_launcher_declared(ctx: Context) -> Iterator[Diagnostic]:
    # A declared per-node launcher with a plain script is fine: the script may start the node's processes
    # itself (the MPI per-node launch of the guides); a per-node launcher declared per-process is not.
    for name, dist, step in launches_of(ctx, "per-node"):
        if ("distributions", name, "launcher") in ctx.loaded.source.keys and dist.launcher != "per-node":
            yield diagnostic_at_command(ctx, name, LAUNCHER_MISMATCH.id,
                              f"distribution {name!r} declares launcher: {dist.launcher}, but its command starts "
                              f"{step.invoked_as}, a per-node launcher",
                              "remove `launcher:` (infra derives it from the command) or set launcher: per-node")


@rule(GPUS_EXCEEDED, GPUS_UNDERUSED)
def distribution_launcher_gpus(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in launches_of(ctx, "per-node"):
        sku = ctx.dist_sku(dist)
        if sku is None or not sku.gpus or dist.processes_per_instance > 1:
            continue
        per_node, said = _per_node_processes(step, dist, sku.gpus)
        if per_node is None:
            continue
        # the launcher's count is per node (torchrun) or across every node (accelerate's --num_processes)
        flags = step.spec.flags
        flag, wanted = ((flags["processes_per_node"][0], sku.gpus) if flags.get("processes_per_node")
                        else (flags.get("processes_total", ("",))[0], sku.gpus * dist.instance_count))
        yield from _gpus_used(
            ctx, name, per_node, sku.gpus,
            (f"{said} starts {per_node} processes on each node, but {sku.name} has {sku.gpus} GPU(s)",
             f"pass {flag} {wanted} (one process per GPU)"),
            (f"{said} starts {per_node} process(es) on each node: {per_node} of the {sku.gpus} GPUs of {sku.name}",
             f"pass {flag} {wanted} to use every GPU you pay for"))


def _gpus_used(ctx: Context, name: str, used: int, gpus: int, exceeded: tuple[str, str],
               underused: tuple[str, str]) -> Iterator[Diagnostic]:
    """distribution.gpus-exceeded (an error) or -underused (a warning): `used` of a node's `gpus`; each tuple is
    the message and the hint."""
    if used > gpus:
        yield diagnostic_at_command(ctx, name, GPUS_EXCEEDED.id, *exceeded)
    elif used < gpus:
        yield diagnostic_at_command(ctx, name, GPUS_UNDERUSED.id, *underused, "warning")


def _nodes_range(value: str) -> tuple[int, int] | None:
    low, sep, high = value.partition(":")
    first, last = count(low), count(high) if sep else count(low)
    return None if first is None or last is None else (first, last)


LAUNCHER_NODES = declare("distribution.launcher-nodes", "error",
                         "the launcher's node count differs from instance_count")


@rule(LAUNCHER_NODES)
def distribution_launcher_nodes(ctx: Context) -> Iterator[Diagnostic]:
    for name, dist, step in launches_of(ctx, "per-node"):
        spec, nodes = step.spec, dist.instance_count
        value = step.role("nodes")
        flag = spec.flags.get("nodes", ("--nnodes",))[0]
        if value is None:
            if spec.nodes_default is not None and spec.nodes_default != nodes:
                yield diagnostic_at_command(ctx, name, LAUNCHER_NODES.id,
                                  f"{step.invoked_as} without {flag} assumes {spec.nodes_default} node(s), but the job "
                                  f"runs on instance_count {nodes}: each node would train alone",
                                  f"pass {flag} {nodes}")
            continue
        span = _nodes_range(value)
        if span is not None and not span[0] <= nodes <= span[1]:
            waits = span[0] > nodes
            yield diagnostic_at_command(ctx, name, LAUNCHER_NODES.id,
                              f"{step.invoked_as} {flag} {value} but the job runs on instance_count {nodes} node(s): "
                              + ("the rendezvous waits for nodes that never come" if waits else
                                 "the surplus nodes cannot join the job"),
                              f"pass {flag} {nodes} (or change instance_count)")


LAUNCHER_RENDEZVOUS = declare("distribution.launcher-rendezvous", "error",
                              "a multi-node per-node launch lacks, or breaks, the rendezvous every node must join")


@rule(LAUNCHER_RENDEZVOUS)
def distribution_launcher_rendezvous(ctx: Context) -> Iterator[Diagnostic]:
    own = launcher_variables()
    known = {v for sets in own.values() for v in sets}
    for name, dist, step in launches_of(ctx, "per-node"):
        if dist.instance_count < 2:
            continue
        spec = step.spec
        values = {r: step.role(r) for r in ("node_rank", "master_addr", "master_port", "rendezvous")}
        suggested = {"pytorch": ("$NODE_RANK", "$MASTER_ADDR", "$MASTER_PORT")}.get(dist.type)
        missing = [r for r in ("node_rank", "master_addr", "master_port") if values[r] is None and spec.flags.get(r)]
        if values["rendezvous"] is None and missing:
            flags = [spec.flags[r][0] for r in ("node_rank", "master_addr", "master_port") if spec.flags.get(r)]
            fix = " ".join(f"{f} {v}" for f, v in zip(flags, suggested)) if suggested else \
                f"{spec.flags.get('rendezvous', flags)[0]} $AZ_BATCH_MASTER_NODE with $OMPI_COMM_WORLD_RANK as the node rank"
            yield diagnostic_at_command(ctx, name, LAUNCHER_RENDEZVOUS.id,
                              f"{step.invoked_as} on {dist.instance_count} nodes without "
                              f"{', '.join(spec.flags[r][0] for r in missing)}: every node starts its own rendezvous "
                              "and waits for the others forever",
                              f"pass {fix} (Azure ML sets these on each node of a {dist.type} job)" if dist.type else
                              "set type: pytorch (Azure ML then sets NODE_RANK, MASTER_ADDR and MASTER_PORT on each node) "
                              "and pass them, or run on one node (instance_count: 1)")
        literal = count(values["node_rank"])
        if literal is not None:
            yield diagnostic_at_command(ctx, name, LAUNCHER_RENDEZVOUS.id,
                              f"{step.invoked_as} {spec.flags['node_rank'][0]} {literal} gives every one of the "
                              f"{dist.instance_count} nodes the same rank",
                              f"pass {spec.flags['node_rank'][0]} "
                              f"${node_rank_variables()[0].get(dist.type, 'NODE_RANK')}")
        for flag in spec.multi_node_requires:
            if flag not in step.options:
                yield diagnostic_at_command(ctx, name, LAUNCHER_RENDEZVOUS.id,
                                  f"{step.invoked_as} on {dist.instance_count} nodes needs {flag} to run once per node "
                                  f"(without it, it starts the other nodes itself over ssh)",
                                  f"add {flag} with --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port "
                                  "$MASTER_PORT, or launch with torchrun")
        unset = sorted({v for value in values.values() for v in variables(value)}
                       & known - set(own.get(dist.type, {})) - set(dist.environment_variables))
        for var in unset:
            yield diagnostic_at_command(ctx, name, LAUNCHER_RENDEZVOUS.id,
                              f"the command passes ${var}, which Azure ML does not set in a "
                              + (f"{dist.type} job" if dist.type else "job without a distribution type"),
                              f"use the variables of type {dist.type}: {', '.join(sorted(own.get(dist.type, {})))}"
                              if dist.type else "set type: pytorch (or mpi), whose launcher sets them")


NODE_RANK_VARIABLE = declare("distribution.node-rank-variable", "error",
                             "the node rank passed is a variable that is 0 on every node")


@rule_for_each("distributions", NODE_RANK_VARIABLE)
def distribution_node_rank_variable(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    """A per-node launch whose node rank is a variable that only reads like one (frameworks.yaml
    not_node_rank: OMPI_COMM_WORLD_NODE_RANK is 0 on every node): every node claims rank 0, the job hangs."""
    step = training_launch(dist)
    if step is None or dist.instance_count < 2:
        return
    if step.kind == "per-node":
        flag = next((f for f in step.spec.flags.get("node_rank", ()) if f in step.options), None)
        value = step.role("node_rank")
    else:   # a script that starts its node's processes itself: its own --node_rank / --node-rank argument
        names = [f for spec in launchers().launchers for f in spec.flags.get("node_rank", ())]
        value = step.script_option(names)
        flag = next((n for n in names for a in step.script_args if a == n or a.startswith(n + "=")), None)
    ranks, wrong = node_rank_variables()
    for var in sorted(variables(value) & wrong):
        right = ranks.get(dist.type, "NODE_RANK")
        one = " with process_count_per_instance: 1 (one process per node, so a process's rank is its node's)" \
            if dist.type == "mpi" else ""
        yield diagnostic_at_command(ctx, name, NODE_RANK_VARIABLE.id,
                          f"{flag} ${var}: despite its name, {var} is not the node's rank (it numbers the processes "
                          f"within one node): it is 0 on every one of the {dist.instance_count} nodes, so each claims "
                          "rank 0 and the rendezvous waits forever",
                          f"pass {flag} ${right}{one} (validators/frameworks.yaml node_rank; "
                          "https://azure.github.io/azureml-cheatsheets/docs/cheatsheets/python/v1/distributed-training)")


def _script_text(ctx: Context, dist: Distribution, script: str | None) -> str | None:
    """The start of the training script the command runs, when it lies inside `code:` (never outside it)."""
    if not (dist.code and script and script.endswith(".py")):
        return None
    code = ctx.loaded.base_dir / dist.code
    return project_text(code / script, code) if inside(code, project_root(ctx.loaded.path)) else None


_TRAINER_KEYWORD = r"\b{}\s*=\s*(-?\d+|['\"]auto['\"])"


LIGHTNING_TRAINER = declare("distribution.lightning-trainer", "error",
                            "Lightning's num_nodes or devices disagree with the job's nodes or processes")


@rule_for_each("distributions", LIGHTNING_TRAINER, GPUS_EXCEEDED, GPUS_UNDERUSED, framework=True)
def distribution_lightning(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    step = training_launch(dist)
    sku = ctx.dist_sku(dist)
    if fw is None or not fw.nodes_flags or step is None or step.kind != "script":
        return
    found: dict[str, tuple[str, str]] = {}   # nodes/devices -> (value, where it was read)
    for key, flags in (("nodes", fw.nodes_flags), ("devices", fw.devices_flags)):
        for s in parsed_command(dist.command)[0]:
            value = s.script_option(flags)
            if value:
                found[key] = (value, next(f for f in flags if s.script_option([f]) is not None))
                break
    text = _script_text(ctx, dist, step.script) if len(found) < 2 else None
    if text is not None:
        for key, keyword in (fw.trainer_keywords or {}).items():
            m = None if key in found else re.search(_TRAINER_KEYWORD.format(re.escape(keyword)), text)
            if m:
                line = text.count("\n", 0, m.start()) + 1
                found[key] = (m.group(1).strip("'\""), f"{keyword}= in {dist.code}/{step.script}:{line}")
    if "nodes" in found:
        value, where = found["nodes"]
        if count(value) is not None and count(value) != dist.instance_count:
            yield diagnostic_at_command(ctx, name, LIGHTNING_TRAINER.id,
                              f"Lightning's {where} {value} but the job runs on instance_count {dist.instance_count} "
                              "node(s): the trainer waits for a world size that never forms",
                              f"set it to {dist.instance_count} (or change instance_count)")
    if "devices" in found and sku is not None and sku.gpus:
        value, where = found["devices"]
        devices = sku.gpus if value in ("-1", "auto") else count(value)
        if devices is None:
            return
        if dist.launcher == "per-process" and dist.processes_per_instance > 1:
            if devices != dist.processes_per_instance:
                yield diagnostic_at_command(ctx, name, LIGHTNING_TRAINER.id,
                                  f"Lightning's {where} {value} but Azure ML starts {dist.processes_per_instance} "
                                  "processes per node (process_count_per_instance): the ranks disagree on the "
                                  "world size", f"set it to {dist.processes_per_instance}")
        else:
            yield from _gpus_used(
                ctx, name, devices, sku.gpus,
                (f"Lightning's {where} {value} but {sku.name} has {sku.gpus} GPU(s)", f"set it to {sku.gpus}"),
                (f"Lightning's {where} {value} uses {devices} of the {sku.gpus} GPUs of {sku.name}",
                 f"set it to {sku.gpus} to use every GPU you pay for"))


def _raise_max_instances(ctx: Context, dist: Distribution, nodes: int) -> str:
    """What a hint proposing instance_count `nodes` must add so that distribution.instance-count holds."""
    cluster = ctx.stack.clusters.get(dist.cluster)
    if cluster is None or nodes <= cluster.max_instances:
        return ""
    return f" with clusters.{dist.cluster}.max_instances raised to {nodes} (it is {cluster.max_instances})"


TENSORFLOW_COUNTS = declare(
    "distribution.tensorflow-counts", "error",
    "TensorFlow's worker and parameter server counts do not fit the job (a warning: more servers than workers)",
    also="warning")
TENSORFLOW_IDLE_NODES = declare("distribution.tensorflow-idle-nodes", "warning",
                                "a TensorFlow job has nodes that run no task")


@rule_for_each("distributions", TENSORFLOW_COUNTS, TENSORFLOW_IDLE_NODES)
def distribution_tensorflow(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    base = ("distributions", name)
    if dist.type != "tensorflow":
        for field_name in ("worker_count", "parameter_server_count"):
            if getattr(dist, field_name) is not None:
                yield ctx.at(base + (field_name,), TENSORFLOW_COUNTS.id,
                             f"{field_name} applies only to type tensorflow (this is {dist.type})",
                             f"remove {field_name}, or set type: tensorflow")
        return
    if dist.process_count_per_instance is not None:
        # Azure ML's TensorFlow distribution has only worker_count and parameter_server_count.
        yield ctx.at(base + ("process_count_per_instance",), TENSORFLOW_COUNTS.id,
                     "process_count_per_instance does not apply to type tensorflow",
                     "remove it and set worker_count (one worker per node uses all its GPUs)")
    nodes = dist.instance_count
    workers = dist.worker_count or nodes
    ps = dist.parameter_server_count or 0
    at = base + ("worker_count",)
    # Azure ML places the worker_count + parameter_server_count tasks on instance_count nodes: parameter
    # servers may share a node with a worker (2 workers + 1 ps on 2 nodes, as the guides show), two workers
    # may not (each worker's strategy claims every GPU of its node).
    if workers > nodes:
        yield ctx.at(at, TENSORFLOW_COUNTS.id,
                     f"{workers} workers on instance_count {nodes} node(s): Azure ML would put two workers on a "
                     "node, and each worker's strategy claims every GPU of its node",
                     f"set worker_count: {nodes} (one worker per node) or instance_count: {workers}"
                     + _raise_max_instances(ctx, dist, workers))
    elif workers + ps < nodes:
        yield ctx.warning(at, TENSORFLOW_IDLE_NODES.id,
                     f"{workers} worker(s){f' + {ps} parameter server(s)' if ps else ''} on instance_count {nodes} "
                     f"nodes: {nodes - workers - ps} node(s) run no task and are paid for idle",
                     f"set worker_count: {nodes - ps} (MultiWorkerMirroredStrategy: one worker per node) or "
                     f"instance_count: {workers + ps}" + _raise_max_instances(ctx, dist, workers + ps))
    if ps and ps >= workers:
        yield ctx.warning(base + ("parameter_server_count",), TENSORFLOW_COUNTS.id,
                     f"{ps} parameter server(s) for {workers} worker(s) is unusual and wastes nodes",
                     "use fewer parameter servers than workers (or none with MultiWorkerMirroredStrategy)")


TRANSFORMERS_LOCAL_RANK = declare("distribution.transformers-local-rank", "error",
                                  "transformers under per-process launch without --local_rank in the command")


@rule_for_each("distributions", TRANSFORMERS_LOCAL_RANK, framework=True)
def distribution_transformers_local_rank(ctx: Context, name: str, dist: Distribution, fw: FrameworkInfo | None) -> Iterator[Diagnostic]:
    needle = fw.per_process_command_must_contain if fw else None
    if fw is None or not (needle and dist.command) or launched_per_node(dist):
        return
    steps, error = parsed_command(dist.command)
    # HF's argument parser accepts --local_rank and --local-rank alike
    spellings = (needle, needle.replace("_", "-"))
    if error is None and not any(s.script_option(spellings) is not None for s in steps):
        yield diagnostic_at_command(ctx, name, TRANSFORMERS_LOCAL_RANK.id,
                          f"{fw.name} under per-process launch needs {needle} in its command: Azure ML sets only "
                          "the LOCAL_RANK variable",
                          f"append `{needle} $LOCAL_RANK` to the command")


INFINIBAND_DISABLED = declare("distribution.infiniband-disabled", "warning",
                              "a multi-node job disables NCCL's InfiniBand on a size that has it")


@rule_for_each("distributions", INFINIBAND_DISABLED)
def distribution_ib_disabled(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    sku = ctx.dist_sku(dist)
    env = revealed(dist.environment_variables)   # judged, never shown: a value may be a secret (${ENV})
    ib_off = env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket"
    if ib_off and sku and sku.infiniband_eligible and dist.instance_count > 1:
        yield ctx.warning(("distributions", name, "environment_variables"), INFINIBAND_DISABLED.id,
                     f"distribution {name!r} disables NCCL's InfiniBand on {sku.name}, which you pay for",
                     "remove NCCL_IB_DISABLE / NCCL_NET=Socket (keep them only as a deliberate negative control)")


LAUNCHER_VARIABLE = declare(
    "distribution.launcher-variable", "error",
    "a distribution sets a variable Azure ML's launcher sets itself (a warning for the rendezvous ones)",
    also="warning")


@rule_for_each("distributions", LAUNCHER_VARIABLE)
def distribution_launcher_variables(ctx: Context, name: str, dist: Distribution) -> Iterator[Diagnostic]:
    set_by_type = launcher_variables()
    sets = set_by_type.get(dist.type, {})
    for var in dist.environment_variables:
        severity = sets.get(var)
        if severity is None:
            continue
        per_process = severity == "error"
        yield ctx.at(("distributions", name, "environment_variables", var), LAUNCHER_VARIABLE.id,
                     f"distribution {name!r} sets {var}, which Azure ML's {dist.type} launcher sets "
                     + ("for each process: one value for every process breaks the ranks" if per_process else
                        "to the rendezvous it starts: another value leaves ranks waiting for a peer that never comes"),
                     f"remove {var} from environment_variables; Azure ML sets it",
                     severity, key=True)
