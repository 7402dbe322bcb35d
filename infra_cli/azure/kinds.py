"""Each resource kind's Azure codec, by the kind's name (the names of plan/kinds KINDS; tests/test_kind_table.py
holds the two tables to the same kinds): how a workspace lists, reads, writes and deletes a resource of that kind,
as plain values. `AzureProvider.list(kind)`, `read(kind, name)`, `write(kind, resource, ...)` and
`delete(kind, name, ...)` (azure/protocol.py) look the kind up here, so the engines read and write a resource by its
kind, and a new kind is its codec module (azure/K_codec.py), one class here and its row, not new Provider methods.

What only one kind has stays the provider's own method, named for it, because nothing else means the same:
an environment's batch read of versions (`read_environments`), the tags an import or `state rm` puts on one version
(`adopt_environment`, `forget_environment`), and infra's own records, kept as environment versions (state/).
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from infra_cli.azure.protocol import Written

if TYPE_CHECKING:   # the provider hands itself in; this table is read by it, not the other way round
    from infra_cli.azure.provider import AzureProvider


class AzureKind:
    """One kind's codec: each method takes the provider whose clients it reads and writes through."""

    def list(self, provider: AzureProvider) -> list[dict[str, Any]]:
        """Every resource of this kind in the workspace, as plain values (one list call, paged)."""
        raise NotImplementedError

    def read(self, provider: AzureProvider, name: str, version: str | None = None) -> dict[str, Any] | None:
        """One resource's values (a kind with versions: `version`, else its latest); None where there is none."""
        raise NotImplementedError

    def write(self, provider: AzureProvider, resource: Written, **specifics: Any) -> Any:
        """Make `resource` so (create, or change what Azure can change in place): what the kind's write needs
        beyond the resource comes as keywords, named by the kind."""
        raise NotImplementedError

    def delete(self, provider: AzureProvider, name: str, **specifics: Any) -> Any:
        """Remove it from the workspace, as far as Azure lets this kind be removed."""
        raise NotImplementedError


class Computes(AzureKind):
    """An AmlCompute cluster: Microsoft.MachineLearningServices/workspaces/computes (azure/compute_codec.py)."""

    def list(self, provider: AzureProvider) -> list[dict[str, Any]]:
        return provider.list_computes()

    def read(self, provider: AzureProvider, name: str, version: str | None = None) -> dict[str, Any] | None:
        return provider.read_compute(name)

    def write(self, provider: AzureProvider, resource: Written, *, secrets: Any = None, subnet: str | None = None,
              vnet_name: str | None = None, **specifics: Any) -> Any:
        """One full PUT; `secrets` what plan never carries (plan/kinds/cluster.py ClusterSecrets)."""
        return provider.put_cluster(resource, secrets, subnet, vnet_name)

    def delete(self, provider: AzureProvider, name: str, **specifics: Any) -> None:
        """Deleted, and waited for until the name is gone (a same-name create racing it keeps the old size)."""
        provider.delete_cluster(name)


class Environments(AzureKind):
    """An environment: Microsoft.MachineLearningServices/workspaces/environments and its immutable versions
    (azure/environment_codec.py)."""

    def list(self, provider: AzureProvider) -> list[dict[str, Any]]:
        """The workspace's environments: name (lower case, as the list is read) and latest version."""
        return [{"name": name, "latest_version": latest} for name, latest in provider.listed_environments()]

    def read(self, provider: AzureProvider, name: str, version: str | None = None) -> dict[str, Any] | None:
        """The version pinned (or the latest), with the next free number."""
        return provider.read_environments({name: version})[name]

    def write(self, provider: AzureProvider, resource: Written, *, base_dir: Path = Path("."),
              conda_file: str | dict | None = None, build_files: Callable[[Path], Path] | None = None,
              **specifics: Any) -> Any:
        """A new version registered (a version is never rewritten); returns its number."""
        return provider.create_environment_version(resource, base_dir, conda_file, build_files)

    def delete(self, provider: AzureProvider, name: str, *, stack: str = "", **specifics: Any) -> builtins.list[str]:
        """Azure ML never deletes an environment's versions (jobs may name them): `stack`'s are archived and lose
        its ownership tags, as `az ml environment archive` does. Returns the versions released."""
        if not stack:   # whose versions: another stack's, or one made outside infra, are never released
            raise ValueError(f"environment {name}: delete archives one stack's versions; name it (stack=...)")
        return provider.archive_environment(name, stack)


AZURE_KINDS: dict[str, AzureKind] = {"cluster": Computes(), "environment": Environments()}
