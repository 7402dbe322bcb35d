"""`infra graph`: the stack's dependency graph as DOT (as `terraform graph`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from system_tools import require

from infra_cli.plan.graph import stack_graph
from infra_cli.stack.load import load_stack

ROOT = Path(__file__).resolve().parents[1]
EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)";$', re.M)
NODE = re.compile(r'^\s*"([^"]+)" \[shape = (\w+)', re.M)


def test_every_smoke_job_points_at_its_cluster_and_environment():
    dot = stack_graph(load_stack(ROOT / "stacks" / "mpi-deepspeed.yaml").stack)
    assert dot.startswith('digraph "mpi-deepspeed" {') and dot.rstrip().endswith("}")
    assert dict(NODE.findall(dot)) == {"cluster.a100-80-deepspeed": "box3d", "environment.openmpi-deepspeed": "folder",
                                       "smoke.deepspeed": "ellipse"}
    assert sorted(EDGE.findall(dot)) == [("smoke.deepspeed", "cluster.a100-80-deepspeed"),
                                         ("smoke.deepspeed", "environment.openmpi-deepspeed")]
    assert "Standard_ND96amsr_A100_v4" in dot and "mpi/deepspeed" in dot


def test_a_dangling_reference_is_drawn_red_and_labels_are_escaped(tmp_path):
    stack = tmp_path / "s.yaml"
    stack.write_text((ROOT / "stacks" / "ib-a100.yaml").read_text())
    loaded = load_stack(stack)
    dist = next(iter(loaded.stack.distributions.values()))
    broken = loaded.stack.model_copy(update={"distributions": {"d": dist.model_copy(update={"cluster": "nope"})}})
    env = next(iter(broken.environments))
    broken.environments[env] = broken.environments[env].model_copy(update={"curated": 'a"b\\c'})
    dot = stack_graph(broken)
    assert re.search(r'"cluster\.nope" \[shape = box3d, color = red, style = dashed', dot)
    assert ("smoke.d", "cluster.nope") in EDGE.findall(dot)
    assert r'a\"b\\c' in dot


def test_graphviz_reads_it_and_the_cli_prints_it(tmp_path):
    r = subprocess.run([sys.executable, "-m", "infra_cli", "graph", str(ROOT / "stacks" / "ib-a100.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("digraph ") and EDGE.findall(r.stdout)
    require("dot")   # the DOT text was checked above; rendering it needs Graphviz
    svg = subprocess.run(["dot", "-Tsvg"], input=r.stdout, capture_output=True, text=True, timeout=60)
    assert svg.returncode == 0 and "<svg" in svg.stdout and "cluster." in svg.stdout


def test_graph_of_a_missing_file_is_a_diagnostic_not_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "infra_cli", "graph", str(tmp_path / "absent.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "absent.yaml" in r.stderr


def test_a_ray_job_and_one_without_a_type_are_labelled_as_what_they_are(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text("stack: kinds\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, "
                    "resource_group: rg, name: mlw-kinds, location: eastus}\n"
                    "clusters: {gpus: {size: Standard_ND96asr_v4, max_instances: 2}}\n"
                    "environments: {env: {image: 'rayproject/ray:latest'}}\n"
                    "distributions:\n  tune: {cluster: gpus, environment: env, distribution: {type: ray}, "
                    "instance_count: 2}\n  prep: {cluster: gpus, environment: env, command: python prep.py}\n")
    dot = stack_graph(load_stack(path).stack)
    assert 'label = "smoke.tune\\nray\\n2 x 1"' in dot
    assert 'label = "smoke.prep\\nno distribution\\n1 x 1"' in dot and "None" not in dot
