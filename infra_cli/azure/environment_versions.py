"""An Azure ML environment's versions over the lean REST client (arm.py): the requests azure-ai-ml's
`ml_client.environments` sends for get, label latest, list, create_or_update and archive, without importing it.

Infra's own records live in environment versions (the stack lock, the state serial, smoke records: lock_store.py,
provider.py), and apply, destroy, import and state rm rewrite tags and archive versions; importing azure-ai-ml for
these few requests cost more than the command's whole work. Answers are the REST resource as Azure sends it:
`{"name": VERSION, "properties": {"tags", "image", "isArchived", ...}}` (EnvironmentVersion in Azure's REST
specification, https://learn.microsoft.com/rest/api/azureml/environment-versions).
"""

from __future__ import annotations

from typing import Any

from infra_cli.azure.url import segment

# The api-version azure-ai-ml 1.35 sends for environments (provider.py reads with the same).
API_ENVIRONMENTS = "2023-04-01-preview"
# readOnly in EnvironmentVersionProperties: never sent back in a PUT
_READ_ONLY = ("environmentType", "provisioningState")
ACTIVE_ONLY, ARCHIVED_ONLY, ALL = "ActiveOnly", "ArchivedOnly", "All"   # ListViewType


def version_tags(body: dict | None) -> dict[str, str]:
    return dict(((body or {}).get("properties") or {}).get("tags") or {})


class EnvironmentVersions:
    """The versions of a workspace's environments. `arm`: arm.ArmClient; `workspace_path`: the workspace's ARM id."""

    def __init__(self, arm: Any, workspace_path: str):
        self.arm, self._path = arm, workspace_path.strip("/")

    def _versions(self, name: str) -> str:
        return f"{self._path}/environments/{segment(name)}/versions"

    def latest(self, name: str) -> dict | None:
        """Label latest as azure-ai-ml resolves it: the newest active version; None when there is none."""
        return self.arm.first(self._versions(name), API_ENVIRONMENTS, **{"$orderBy": "createdtime desc", "$top": 1})

    def get(self, name: str, version: str) -> dict | None:
        return self.arm.get(f"{self._versions(name)}/{segment(version)}", API_ENVIRONMENTS)

    def list(self, name: str, view: str = ACTIVE_ONLY) -> list[dict]:
        """Every version in `view`; none when the environment does not exist."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self.arm.list(self._versions(name), API_ENVIRONMENTS, listViewType=view)
        except ResourceNotFoundError:
            return []

    def register(self, name: str, version: str, properties: dict) -> dict:
        """PUT a version. A version is immutable: Azure refuses other content under a registered number
        (HttpResponseError), which is what makes a lock or a record registration atomic."""
        body = {"properties": {"isAnonymous": False, "isArchived": False, **properties}}
        return self.arm.put(f"{self._versions(name)}/{segment(version)}", API_ENVIRONMENTS, body)

    def rewrite(self, name: str, version: str, *, tags: dict[str, str] | None = None,
                archived: bool | None = None) -> None:
        """The same content with other tags or archived (the only things a registered version may change), as
        azure-ai-ml's create_or_update of a version read back, and its archive, send it."""
        from azure.core.exceptions import ResourceNotFoundError

        found = self.get(name, version)
        if found is None:
            raise ResourceNotFoundError(f"environment {name} has no version {version}")
        properties = {k: v for k, v in (found.get("properties") or {}).items() if k not in _READ_ONLY}
        if tags is not None:
            properties["tags"] = tags
        if archived is not None:
            properties["isArchived"] = archived
        self.arm.put(f"{self._versions(name)}/{segment(version)}", API_ENVIRONMENTS, {"properties": properties})
