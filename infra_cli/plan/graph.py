"""`infra graph`: the stack's resources and what depends on what, as Graphviz DOT (as `terraform graph`).

Nodes are the plan's addresses (cluster.NAME, environment.NAME, smoke.DISTRIBUTION); an edge points from a
smoke job to the cluster and environment it runs on (plan.desired.distribution_dependencies, the same map
--target and the smoke scheduling use). A reference to an address the stack does not declare is drawn as a
red, dashed node, so the picture shows the mistake `infra validate` reports.
"""

from __future__ import annotations

from infra_cli.plan.desired import distribution_dependencies
from infra_cli.plan.kinds import KINDS
from infra_cli.stack.model import Environment, Stack

_SHAPES = {**{kind.name: kind.graph_shape for kind in KINDS.values()}, "smoke": "ellipse"}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _environment_label(env: Environment) -> str:
    if env.curated:
        return env.curated
    if env.image:
        return env.image
    if env.build is not None:
        return f"build: {env.build.template or env.build.path}"
    return "environment"


def stack_graph(stack: Stack) -> str:
    """The DOT text of the stack's dependency graph (deterministic: nodes and edges sorted)."""
    labels: dict[str, str] = {}
    for name, cluster in stack.clusters.items():
        labels[f"cluster.{name}"] = f"{cluster.size}\nmax {cluster.max_instances} node(s)"
    for name, env in stack.environments.items():
        labels[f"environment.{name}"] = _environment_label(env)
    for name, dist in stack.distributions.items():
        shape = f"{dist.instance_count} x {dist.process_count_per_instance or 1}"
        kind = dist.type or "no distribution"   # a job without a type: one command on its node
        labels[f"smoke.{name}"] = f"{kind}{'/' + dist.framework if dist.framework else ''}\n{shape}"
    edges = sorted((job, dependency) for job, dependencies in distribution_dependencies(stack).items()
                   for dependency in dependencies)
    lines = [f"digraph {_quoted(stack.stack)} {{", "  rankdir = \"RL\";", "  node [fontname = \"sans-serif\"];"]
    for address in sorted(labels):
        kind = address.split(".", 1)[0]
        label = _quoted(f"{address}\n{labels[address]}")
        lines.append(f"  {_quoted(address)} [shape = {_SHAPES[kind]}, label = {label}];")
    for missing in sorted({dependency for _, dependency in edges} - set(labels)):
        label = _quoted(f"{missing}\nnot declared in the stack")
        lines.append(f"  {_quoted(missing)} [shape = {_SHAPES[missing.split('.', 1)[0]]}, color = red, "
                     f"style = dashed, label = {label}];")
    lines += [f"  {_quoted(job)} -> {_quoted(dependency)};" for job, dependency in edges]
    lines.append("}")
    return "\n".join(lines) + "\n"
