"""How apply carries out a change of one kind of resource (`KindSteps`): the kind's own module under apply/kinds/
(cluster.py, environment.py), registered in apply/kinds/__init__.py STEPS. What a change is, and why, is the
kind's plan module (plan/kinds/); this is how it is made on Azure through the provider. The executor
(apply/executor.py) looks a change's kind up here instead of branching on its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from infra_cli.arguments import NextStep
from infra_cli.azure.protocol import Provider
from infra_cli.conventions import TAG_SECRETS
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.plan.api import (ClusterSecrets, LiveState, Plan, Resource, ResourceChange, cluster_secrets,
                                ssh_credentials_hash)
from infra_cli.stack.load import LoadedStack

Say = Callable[[str, str], None]   # (phase, text): a step's progress, as the executor reports it


class Applying(Protocol):
    """What a step is handed of the apply that runs it (apply/executor.py Applier)."""
    provider: Provider
    loaded: LoadedStack
    poll_s: float
    settle_timeout_s: float


class KindSteps:
    def step(self, run: Applying, change: ResourceChange, desired: Resource | None, say: Say, *, first: bool) -> None:
        """Make `change` (after an import block's adoption, if any). `first`: the first attempt (a retry starts
        from what Azure then shows)."""
        raise NotImplementedError

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """An import block (Terraform's import): infra's ownership tags on the existing resource; idempotent."""
        raise NotImplementedError

    def past(self, change: ResourceChange) -> str:
        """What the change did, once done."""
        return change.action.past

    def destroy_refusal(self, change: ResourceChange, plan: Plan, live: LiveState, verb: str, file: str, hint: str
                        ) -> Diagnostic | None:
        """Why apply refuses a saved plan's delete or replace of this resource, whatever the plan says; None: safe."""
        raise NotImplementedError

    # ---- `infra import` and `infra state rm` (apply/engine.py) ------------------------------------------------

    def importable(self, loaded: Any, address: str, name: str, provider: Provider) -> Any:
        """The live resource `infra import` adopts, or the reason it cannot (DiagnosticError)."""
        raise NotImplementedError

    def adopt_imported(self, loaded: Any, address: str, name: str, provider: Provider, live: Any) -> str:
        """This stack's ownership tags written on it, nothing else changed; what was done."""
        raise NotImplementedError

    def after_import(self, stack_path: Path) -> str:
        """What to say after an import, beside what was done."""
        return ""

    def forget(self, loaded: Any, address: str, name: str, provider: Provider, bump_serial: Callable[[], Any],
               error: Callable[[str, str], DiagnosticError]) -> str:
        """`infra state rm`: this stack's ownership tags taken off, nothing else changed (the serial bumped first,
        once the resource is found the stack's); what was done."""
        raise NotImplementedError


def import_error(loaded: Any, message: str, hint: str, rule: str = "import.invalid") -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", rule, message, loaded.file, None, None, hint)])


def already_managed(loaded: Any, address: str, what: str) -> DiagnosticError:
    # Terraform: "Resource already managed by Terraform". Importing again would overwrite the hash of what the
    # stack last applied with the live values, hiding from the next plan a drift it should show.
    file = loaded.file
    return import_error(loaded, f"{address} is already managed by stack {loaded.stack.stack!r}: {what} carries "
                        "its ownership tags", says("nothing to import: ", NextStep(("infra", "plan"), (file,)),
                                                     " shows how it differs from the stack. To adopt it again, run ",
                                                     NextStep(("infra", "state", "rm"), (address, file)), " first"),
                        "import.already-managed")


def unowned(loaded: Any, address: str, live: Any, what: str) -> Any:
    """`live`, when no stack owns it; an error naming its owner otherwise."""
    if live.owner_stack == loaded.stack.stack:
        raise already_managed(loaded, address, what)
    if live.owner_stack:
        raise import_error(loaded, f"{what} belongs to stack {live.owner_stack!r}", "remove it from that stack first")
    return live


def secrets_for_put(loaded: Any, name: str, live: Resource) -> tuple[ClusterSecrets, dict[str, str]]:
    """The SSH credentials a PUT that changes only tags must send, and the tag that records them: Azure refuses a
    PUT whose credentials differ from the cluster's, and never returns them, so they come from the stack where it
    declares the cluster with the same admin user (its ${VAR}s), else none are sent (a cluster without them)."""
    cluster = loaded.stack.clusters.get(name)
    secrets = cluster_secrets(cluster) if cluster is not None else None
    if secrets is not None and secrets.admin_username == live.attributes.get("ssh_admin_username"):
        digest = ssh_credentials_hash(loaded.stack.stack, name, secrets)
        return secrets, {TAG_SECRETS: digest} if digest else {}
    return ClusterSecrets(admin_username=live.attributes["ssh_admin_username"]), {}
