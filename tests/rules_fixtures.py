"""What the rule tests share (tests/test_rules_*.py): a minimal stack written to a file and judged by the real
loader and rules, with the position, severity and hint of each diagnostic checked; and, on every stack a test
judges, that each check reports only the rule ids it declares (registry.py `declare`)."""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.skus import load_catalog
from infra_cli.stack.load import LoadedStack, load_stack
from infra_cli.validate.engine import validate_stack
from infra_cli.validate.rules.registry import RULES, Context, declared_by


ROOT = Path(__file__).resolve().parent.parent


HEADER = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
"""


A100 = "Standard_ND96asr_v4"


CURATED = "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"


class Checked:
    def __init__(self, text: str, diagnostics: list[Diagnostic], file: str):
        self.text, self.diagnostics, self.file = text, diagnostics, file

    def of(self, rule: str) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.rule == rule]

    def one(self, rule: str, severity: str, at: str, nth: int = 1) -> Diagnostic:
        """The single diagnostic of `rule`; checks its severity, hint, and that it points at `at` (a text snippet)."""
        found = self.of(rule)
        assert len(found) == 1, (rule, self.diagnostics)
        d = found[0]
        assert d.severity == severity, d
        assert d.hint, d
        assert d.file == self.file
        assert (d.line, d.column) == self.position(at, nth), (d, at)
        return d

    def position(self, snippet: str, nth: int = 1) -> tuple[int, int]:
        """Where `snippet` starts; for `key: value` where the value starts (rules point at values)."""
        start = -1
        for _ in range(nth):
            start = self.text.index(snippet, start + 1)
        if ": " in snippet:
            start += snippet.index(": ") + 2
        before = self.text[:start]
        return before.count("\n") + 1, start - (before.rfind("\n") + 1) + 1


# What a check passes on as raised, not a rule of its own: a broken template.yaml of infra's templates/docker/
PASSED_ON = frozenset({"knowledge.invalid", "build.template", "build.parameters"})


def undeclared(loaded: LoadedStack, today: datetime.date | None = None) -> list[tuple[str, Diagnostic]]:
    """(check, diagnostic) for each diagnostic a check reports under an id it does not declare, or with a severity
    its rule does not have: every id a rule emits is one `infra rules` lists, with its page."""
    ctx = Context(loaded, load_catalog(), today or datetime.date.today())
    out = []
    for fn in RULES:
        declared = {info.id: info for info in declared_by(fn)}
        for d in fn(ctx):
            info = declared.get(d.rule)
            if d.rule not in PASSED_ON and (info is None or d.severity not in (info.severity, info.also)):
                out.append((fn.__name__, d))
    return out


def check(tmp_path: Path, body: str, header: str = HEADER) -> Checked:
    text = header + textwrap.dedent(body)
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = load_stack(path)
    assert undeclared(loaded) == []
    return Checked(text, validate_stack(loaded), str(path))


def one_distribution(size: str, env: str, dist: str, cluster_extra: str = "", max_instances: int = 4) -> str:
    """A stack with one cluster `gpu`, one environment `env` (YAML lines) and one distribution `job`."""
    indent = lambda block, n: textwrap.indent(textwrap.dedent(block).strip("\n"), " " * n)  # noqa: E731
    return (f"clusters:\n  gpu:\n    size: {size}\n    max_instances: {max_instances}\n"
            + (indent(cluster_extra, 4) + "\n" if cluster_extra else "")
            + "environments:\n  env:\n" + indent(env, 4) + "\n"
            + "distributions:\n  job:\n    cluster: gpu\n    environment: env\n" + indent(dist, 4) + "\n")


CURATED_ENV = f"curated: {CURATED}"


CUSTOM_IMAGE = "image: myacr.azurecr.io/train:1"


RENDEZVOUS = "--node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"


PER_NODE_MPI = ("type: mpi\ninstance_count: 2\nprocess_count_per_instance: 1\n"
                "command: 'torchrun --nnodes 2 --nproc_per_node 8 --node_rank {rank} "
                "--master_addr $(echo $AZ_BATCH_MASTER_NODE | cut -d: -f1) --master_port 6105 train.py'\n")


def errors(r: Checked) -> list[Diagnostic]:
    return [d for d in r.diagnostics if d.severity == "error"]


def _deepspeed_conda(tmp_path: Path, packages: str) -> str:
    (tmp_path / "conda.yml").write_text("dependencies:\n  - python=3.10\n  - pip:\n" + packages, encoding="utf-8")
    return one_distribution(A100, CUSTOM_IMAGE + "\nconda_file: conda.yml\nrequires: [openmpi>=4.1]",
                            "type: mpi\nframework: deepspeed\nprocess_count_per_instance: 8\n")


def _context(tmp_path: Path, dockerfile: str, requirements: str = "") -> str:
    (tmp_path / "ctx").mkdir(exist_ok=True)
    (tmp_path / "ctx" / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    (tmp_path / "ctx" / "requirements.txt").write_text(requirements, encoding="utf-8")
    return one_distribution(A100, "build: {path: ctx}", "type: mpi\nframework: deepspeed\nprocess_count_per_instance: 8\n")


OPENMPI_BASE = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04"


def _sizes_named(hint: str) -> list[str]:
    return hint.split("size (")[1].split(")")[0].split(", ")
