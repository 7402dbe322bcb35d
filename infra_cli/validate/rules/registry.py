"""The rule registry: the Context a rule reads (the loaded stack, the size catalog, the day retirements are
judged on), and `rule` / `rule_for_each`, which append a rule to RULES as it is defined: the order the rule
modules are imported in (infra_cli/validate/rules/__init__.py), then their order in each, is the order rules run."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Callable, Iterator

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.frameworks import FrameworkInfo, frameworks
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Distribution


@dataclass(frozen=True)
class Context:
    loaded: LoadedStack
    catalog: Catalog
    today: datetime.date = field(default_factory=datetime.date.today)  # retirements are judged as of this day

    @property
    def stack(self):
        return self.loaded.stack

    def at(self, path: tuple, rule: str, message: str, hint: str, severity: str = "error",
           key: bool = False) -> Diagnostic:
        return self.loaded.source.diagnostic(path, rule, message, hint, severity, key=key)

    def warning(self, path: tuple, rule: str, message: str, hint: str) -> Diagnostic:
        return self.at(path, rule, message, hint, "warning")

    def sku(self, cluster_name: str) -> Sku | None:
        cluster = self.stack.clusters.get(cluster_name)
        return self.catalog.get(cluster.size) if cluster else None

    @staticmethod
    def framework(dist: Distribution) -> FrameworkInfo | None:
        """The distribution's framework facts from frameworks.yaml (None without a framework)."""
        return frameworks().get(dist.framework) if dist.framework else None


Rule = Callable[[Context], Iterator[Diagnostic]]


RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def rule_for_each(section: str, *, framework: bool = False) -> Callable[[Callable[..., Iterator[Diagnostic]]], Rule]:
    """A rule judged once per entry of a stack section (clusters, environments, distributions):
    fn(ctx, name, entry) yields the entry's diagnostics; with framework=True (distributions),
    fn(ctx, name, dist, fw) also gets the framework's facts from frameworks.yaml (None without one)."""
    def register(fn: Callable[..., Iterator[Diagnostic]]) -> Rule:
        def each_entry(ctx: Context) -> Iterator[Diagnostic]:
            for name, entry in getattr(ctx.stack, section).items():
                yield from (fn(ctx, name, entry, ctx.framework(entry)) if framework else fn(ctx, name, entry))
        each_entry.__name__, each_entry.__doc__ = fn.__name__, fn.__doc__
        return rule(each_entry)
    return register
