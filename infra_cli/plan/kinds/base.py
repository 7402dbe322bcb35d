"""What every resource kind answers (`Kind`), and the diff's helpers the kinds share: the diagnostics of a
resource another owner holds, of an import block naming nothing, and the change an import block adopts.

A kind is one module of plan/kinds/ (cluster.py, environment.py), registered in plan/kinds/__init__.py KINDS:
the engines look a resource's kind up there instead of branching on its name. A kind says what the stack asks for
(`desired`, plan/desired.py), what Azure has (`read_live`, `normalise`, `live_resources`: plan/live.py) and how
the two compare (`judge` and the rest of the diff).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.azure.protocol import Provider
from infra_cli.diagnostics import Diagnostic, LIST_INSTEAD, says
from infra_cli.plan.model import LiveState, Resource, ResourceChange
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Stack
from infra_cli.stack.source import SourceMap

REPLACE_REQUESTED = "replace requested"


@dataclass(frozen=True)
class DiffContext:
    """What a kind's diff judges by besides the resource: the stack's name, where each key of its file is, its
    import blocks (address -> Azure name), the mode (normal, destroy, refresh-only) and `now` (epoch seconds, None:
    the clock)."""
    stack: str
    source: SourceMap
    imports: dict[str, str]
    mode: str = "normal"
    now: float | None = None


class Kind:
    """One kind of resource: its names, and its part of the diff. Each method's default is "nothing of this
    kind": a kind overrides what it has."""

    name: str = ""          # the address's first part and Resource.type: "cluster"
    section: str = ""       # the stack file's section: "clusters"
    az_noun: str = ""       # the az ml command group that lists it: "compute"

    def az_listing(self) -> NextStep:
        """The az command that lists this kind's resources in the workspace (on the local Azure, the stack's state
        lists them instead)."""
        return NextStep(("az", "ml", self.az_noun, "list"), local_instead=LIST_INSTEAD)
    imported_noun: str = ""  # what an import block of it names in Azure: "AmlCompute cluster"
    graph_shape: str = "box"  # its node's shape in `infra graph` (Graphviz)
    # its changes carry a VM size (attribute `size`), which the region's sizes and quota (plan/preflight.py) and
    # prices (plan/cost.py) judge
    sized: bool = False
    # its nodes may be made without public IPs, which needs a subnet unless the workspace has a managed network: a
    # create or replace of it is judged against the workspace's isolation (plan/preflight.py public_ip_without_subnet)
    public_ip_needs_subnet: bool = False
    # a declaration of it may be a curated one (a registry's, only read), whose reference a plan resolves to a
    # version: `resolved`, by name, shown in its change (plan/engine.py with_resolved_environments)
    resolves_curated: bool = False

    # its own records (lock, serial, smoke verdicts: state/) are kept as resources of this kind, and read in its
    # batch (plan/live.py read_live), so a plan lists the workspace's resources of it once
    keeps_state: bool = False

    # its outputs read the stack's declaration of it (an environment's image and curated reference), not Azure
    # alone: an output of it needs the variables that declaration is built from (plan/outputs.py output_needs)
    outputs_read_declaration: bool = False

    def declared(self, stack: Stack) -> dict[str, Any]:
        """The stack's declarations of this kind, by name."""
        raise NotImplementedError

    def live(self, live: LiveState) -> dict[str, Resource]:
        """The live resources of this kind, by Azure name: its own entry of LiveState, under its name."""
        return live.of(self.name)

    # ---- desired state (plan/desired.py) and live state (plan/live.py) ---------------------------------------

    def desired(self, loaded: LoadedStack) -> list[Resource]:
        """The stack's resources of this kind as the diff compares them (normalised, secret-free), each with the
        ownership tags an apply writes, in the stack's order."""
        raise NotImplementedError

    def wanted(self, desired: list[Resource]) -> dict[str, str | None]:
        """What a plan reads live of this kind for the stack's resources: Azure name -> the version pinned (None:
        the latest, or a kind without versions)."""
        return {r.name: None for r in desired if r.type == self.name}

    def read_live(self, provider: Provider, wanted: dict[str, str | None]) -> Any:
        """Azure's answer for `wanted` (and whatever else one batch of reads brings), as the provider hands it:
        plain data, which `live_resources` takes. Called on the plan's read pool, beside the other kinds'."""
        raise NotImplementedError

    def normalise(self, values: dict[str, Any]) -> Resource:
        """One live resource of this kind from the provider's values, in the shape `desired` gives (so a plan right
        after an apply is empty)."""
        raise NotImplementedError

    def live_resources(self, read: Any, wanted: dict[str, str | None]) -> dict[str, Resource]:
        """`read_live`'s answer as normalised resources by Azure name; a DiagnosticError where one the plan needs
        could not be read as it must (never a guess)."""
        return {name: self.normalise(read[name]) for name in wanted if read.get(name) is not None}

    def held_by_other(self, current: Resource) -> bool:
        """Whether what holds the name is something else than this kind (a workspace's computes share one
        namespace): never infra's to adopt or change."""
        return False

    def exists(self, current: Resource | None) -> bool:
        """Whether the live resource read is there to compare with (an environment: some version of it)."""
        return current is not None

    def adoptable(self, current: Resource) -> bool:
        """Whether an import block may adopt this existing resource: no stack owns it."""
        return not current.owner_stack

    def managed(self, desired: Resource) -> bool:
        """Whether infra makes what this declaration describes (so an import block or --replace may name it),
        rather than only naming something that exists (a curated environment)."""
        return True

    def judge(self, desired: Resource, current: Resource | None, adopt: bool, ctx: DiffContext
              ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        """The change (and the diagnostics) that take `current` (this stack's, or one an import block adopts;
        absent or not there: None, or what was read of it) to the declaration."""
        raise NotImplementedError

    def diff_declared(self, desired: Resource, live: LiveState, ctx: DiffContext
                      ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        """The change (and the diagnostics) that take the live resource to the one the stack declares: one
        another stack owns, or none owns without an import block, is left alone and said; an import block that
        names nothing is said."""
        current = self.live(live).get(desired.name)
        found = current if current is not None and self.exists(current) else None
        adopt = desired.address in ctx.imports and found is not None and self.adoptable(found)
        if desired.address in ctx.imports and found is None and self.managed(desired):
            return [], [import_missing(self, desired, ctx)]
        if found is not None and found.owner_stack != ctx.stack and not adopt:
            return [], [not_owned(self, desired.address, desired.name, found, ctx)]
        return self.judge(desired, current, adopt, ctx)

    def diff_undeclared(self, desired: list[Resource], live: LiveState, ctx: DiffContext
                        ) -> tuple[list[ResourceChange], list[Diagnostic]]:
        """What becomes of this stack's live resources of this kind the stack no longer declares (or all of
        them, on destroy)."""
        return [], []

    def replace_requested(self, change: ResourceChange, source: SourceMap
                          ) -> tuple[list[ResourceChange], list[Diagnostic]] | None:
        """`--replace ADDR` on this change: the changes and diagnostics it becomes; None: it stays as it is."""
        return None

    def drift(self, desired: list[Resource], live: LiveState, stack: str) -> list[ResourceChange]:
        """This stack's live resources changed outside infra."""
        return []

    def headline(self, change: ResourceChange, action: str) -> str | None:
        """The line `infra plan` heads this change with, where the kind says more than the action's own
        (commands/views/plan.py); None: the action's."""
        return None

    # ---- outputs (plan/outputs.py) ---------------------------------------------------------------------------

    def output(self, name: str, attribute: str, change: ResourceChange | None, live: LiveState, stack: Stack,
               resolved: dict[str, str | None]) -> Any:
        """An output's `KIND.NAME.ATTRIBUTE`: from the plan's `change` of it where it has one (what the stack sets
        is known, what Azure will say is UNKNOWN), else live; None where the stack has none of it."""
        raise NotImplementedError

    # ---- `plan --generate-config-out` (plan/generate.py) ---------------------------------------------------

    def read_imported(self, provider: Provider, wanted: list[tuple[int, str]], imports: list[Any]) -> dict[int, Any]:
        """What Azure has for each undeclared import target of this kind ((index of its import block, name)):
        index -> what `declaration` reads (None: not there)."""
        raise NotImplementedError

    def declaration(self, name: str, azure_name: str, read: Any, where: str
                    ) -> tuple[dict[str, Any], list[str]] | None:
        """Its stack entry as read live, and the notes on it; None where Azure has no such resource."""
        raise NotImplementedError


def not_owned(kind: Kind, address: str, name: str, live: Resource, ctx: DiffContext) -> Diagnostic:
    owner, source, stack = live.owner_stack, ctx.source, ctx.stack
    at = (kind.section, name)
    if kind.held_by_other(live):
        return source.diagnostic(at, "plan.name-taken-by-other-compute",
                                 f"{kind.name} {name!r}: the workspace already has a compute of that name that is "
                                 f"not an AmlCompute cluster ({live.attributes['compute_type']}); infra manages "
                                 "AmlCompute clusters only and will not touch it",
                                 f"rename {address} in this stack (a workspace's compute names are unique)", key=True)
    if owner and owner != stack:
        return source.diagnostic(at, "plan.owned-by-other-stack",
                                 f"{kind.name} {name!r} exists in Azure but belongs to stack {owner!r}, not {stack!r}",
                                 f"rename {address} in this stack, or remove it from stack {owner!r} first", key=True)
    hint = says(f"adopt it with an import block (`import: [{{to: {address}, id: {name}}}]`) or ",
                NextStep(("infra", "import"), (address, name, source.file)), f", or rename {address}")
    return source.diagnostic(at, "plan.unmanaged-resource",
                             f"{kind.name} {name!r} already exists in Azure without this stack's ownership tag; "
                             "the plan will not touch it", hint, key=True)


def import_missing(kind: Kind, res: Resource, ctx: DiffContext) -> Diagnostic:
    """Terraform's "Cannot import non-existent remote object"."""
    return ctx.source.diagnostic(import_at(ctx.imports, res.address), "import.not-found",
                                 f"import of {res.address}: there is no {res.type} {ctx.imports[res.address]!r} in "
                                 f"the workspace to import", says("check the name (", kind.az_listing(), "), or "
                                                                 "remove the import block to let infra create it"))


def import_at(imports: dict[str, str], address: str) -> tuple:
    """The stack file's place of the import block of `address`."""
    return ("import", list(imports).index(address), "id")


def adopted(change: ResourceChange, azure_name: str) -> ResourceChange:
    return replace(change, importing=azure_name)


def next_version(version: str | None) -> str:
    return str(int(version) + 1) if version and version.isdigit() else "1"
