"""The rule registry: the Context a rule reads (the loaded stack, the size catalog, the day retirements are
judged on), `declare` (a rule id with its default severity and one-line summary, as tflint's rules carry theirs),
and `rule` / `rule_for_each`, which append a check to RULES as it is defined, with the ids it reports: the order
the rule modules are imported in (infra_cli/validate/rules/__init__.py), then their order in each, is the order
the checks run. `catalogue()` is every declared rule, in that order (`infra rules`; a page each under
docs/rules/ID.md)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from infra_cli.diagnostics import Diagnostic, Severity
from infra_cli.knowledge.frameworks import FrameworkInfo, frameworks
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Distribution


@dataclass(frozen=True)
class Context:
    loaded: LoadedStack
    catalog: Catalog
    today: datetime.date = field(default_factory=datetime.date.today)  # retirements are judged as of this day
    # the sizes plan read live of computes infra does not manage (name -> size): offline, none is known
    live_sizes: dict[str, str] = field(default_factory=dict)

    @property
    def stack(self):
        return self.loaded.stack

    def at(self, path: tuple, rule: str, message: str, hint: str, severity: Severity = "error",
           key: bool = False) -> Diagnostic:
        return self.loaded.source.diagnostic(path, rule, message, hint, severity, key=key)

    def warning(self, path: tuple, rule: str, message: str, hint: str) -> Diagnostic:
        return self.at(path, rule, message, hint, "warning")

    def sku(self, cluster_name: str) -> Sku | None:
        cluster = self.stack.clusters.get(cluster_name)
        return self.catalog.get(cluster.size) if cluster else None

    def size_of(self, dist: Distribution) -> str | None:
        """The size the distribution runs on (Stack.size_of: a cluster's size, a serverless instance_type; a
        compute infra does not manage, the size plan read live, if it did)."""
        if dist.runs_on == "compute":
            return self.live_sizes.get(dist.compute_name or "")
        return self.stack.size_of(dist)

    def dist_sku(self, dist: Distribution) -> Sku | None:
        """The catalog's row for the size the distribution runs on (size_of), None where unknown."""
        size = self.size_of(dist)
        return self.catalog.get(size) if size is not None else None

    @staticmethod
    def size_path(name: str, dist: Distribution) -> tuple:
        """Where the distribution's size is written: its `cluster:`, or a serverless job's resources.instance_type."""
        return ("distributions", name) + (("resources", "instance_type") if dist.runs_on == "serverless" else
                                          ("compute",) if dist.runs_on == "compute" else ("cluster",))

    @staticmethod
    def runs_on_words(dist: Distribution) -> str:
        """Where the distribution runs, as messages name it: cluster 'NAME', compute 'NAME', serverless compute."""
        return {"cluster": f"cluster {dist.cluster!r}", "compute": f"compute {dist.compute_name!r}",
                "serverless": "serverless compute"}[dist.runs_on]

    @staticmethod
    def framework(dist: Distribution) -> FrameworkInfo | None:
        """The distribution's framework facts from frameworks.yaml (None without a framework)."""
        return frameworks().get(dist.framework) if dist.framework else None


@dataclass(frozen=True)
class RuleInfo:
    """One rule as users meet it: the id its diagnostics carry, the severity it reports by default (`also`: the
    other one it reports in the cases its page names), a one-line summary and its page."""

    id: str
    severity: Severity
    summary: str
    also: Severity | None = None

    @property
    def doc(self) -> str:
        return f"docs/rules/{self.id}.md"

    @property
    def switchable(self) -> bool:
        """A stack may switch off what the rule warns of (`rules: {ID: {enabled: false, reason: ...}}`); an error is
        what Azure ML refuses or a job that cannot work, and is never switched off."""
        return "warning" in (self.severity, self.also)

    def to_json(self) -> dict:
        return {"id": self.id, "severity": self.severity, "summary": self.summary, "doc": self.doc,
                "switchable": self.switchable}


DECLARED: dict[str, RuleInfo] = {}


def declare(rule_id: str, severity: Severity, summary: str, also: Severity | None = None) -> RuleInfo:
    """A rule id declared once, where the check that reports it is defined (two checks may report one id: the
    second names the first's declaration)."""
    info = RuleInfo(rule_id, severity, summary, also)
    if DECLARED.setdefault(rule_id, info) != info:
        raise ValueError(f"rule {rule_id} is declared twice, differently")
    return info


# What a check reports: its rules, or a function giving them (rules read from validators/, e.g. names.yaml's)
Declares = Iterable[RuleInfo] | Callable[[], Iterable[RuleInfo]]
Rule = Callable[[Context], Iterator[Diagnostic]]


RULES: list[Rule] = []


def declared_by(check: Rule) -> tuple[RuleInfo, ...]:
    """The rules a check reports, as its decorator declared them."""
    declares: Declares = check.declares  # type: ignore[attr-defined]
    return tuple(declares() if callable(declares) else declares)


def rule(*declares: RuleInfo, read: Callable[[], Iterable[RuleInfo]] | None = None) -> Callable[[Rule], Rule]:
    """Register a check over the whole stack, reporting the rules `declares` (or those `read` gives)."""
    def register(fn: Rule) -> Rule:
        fn.declares = read if read is not None else declares  # type: ignore[attr-defined]
        RULES.append(fn)
        return fn
    return register


def rule_for_each(section: str, *declares: RuleInfo,
                  framework: bool = False) -> Callable[[Callable[..., Iterator[Diagnostic]]], Rule]:
    """A check judged once per entry of a stack section (clusters, environments, distributions), reporting the
    rules `declares`: fn(ctx, name, entry) yields the entry's diagnostics; with framework=True (distributions),
    fn(ctx, name, dist, fw) also gets the framework's facts from frameworks.yaml (None without one)."""
    def register(fn: Callable[..., Iterator[Diagnostic]]) -> Rule:
        def each_entry(ctx: Context) -> Iterator[Diagnostic]:
            for name, entry in getattr(ctx.stack, section).items():
                yield from (fn(ctx, name, entry, ctx.framework(entry)) if framework else fn(ctx, name, entry))
        each_entry.__name__, each_entry.__doc__, each_entry.__module__ = fn.__name__, fn.__doc__, fn.__module__
        return rule(*declares)(each_entry)
    return register


def catalogue() -> list[RuleInfo]:
    """Every rule, once, in the order the checks run (then the stack's own `rules:` switches' rules)."""
    seen: dict[str, RuleInfo] = {}
    for check in RULES:
        for info in declared_by(check):
            seen.setdefault(info.id, info)
    for info in DECLARED.values():
        seen.setdefault(info.id, info)
    return list(seen.values())
