"""Where the stack lock lives: the versions of an Azure ML environment (state/lock.py says why), and beside it
the stack's lineage and serial (state/serial.py). This module is the REST under both (environment_versions.py):
read the latest version's tags, register a version, archive versions."""

from __future__ import annotations

import uuid
from typing import Callable

from infra_cli.azure.environment_versions import ARCHIVED_ONLY, EnvironmentVersions, version_tags

LOCK_IMAGE = "mcr.microsoft.com/azureml/infra-lock:none"  # never pulled: the version records the lock only


class LockWriteRefused(Exception):
    """Registering a lock version failed (taken by another writer, or a transient fault): `error` is Azure's."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _number(body: dict) -> int | None:
    version = str(body.get("name") or "")
    return int(version) if version.isdigit() else None


def latest_lock_version(versions: EnvironmentVersions, name: str) -> tuple[int, dict[str, str]] | None:
    """(version, tags) of the lock environment's latest version; None when it has none. Every version archived
    (a destroyed stack's records, archive_versions): the latest archived number, free (no tags), so the next
    version registered passes it (versions are immutable, archived ones too)."""
    latest = versions.latest(name)
    if latest is None:
        archived = highest_archived_version(versions, name)
        return None if archived is None else (archived, {})
    return (_number(latest) or 0), version_tags(latest)


def highest_archived_version(versions: EnvironmentVersions, name: str) -> int | None:
    """The highest numbered archived version of an environment; None when it has none. Read only where label
    latest found nothing (label latest sees active versions only). Archived versions only: an active version
    registered meanwhile by another writer is not taken for a free one, so registering past this number races
    with that writer as any registration does (the version is immutable: one of the two is refused)."""
    numbers = [n for n in map(_number, versions.list(name, ARCHIVED_ONLY)) if n is not None]
    return max(numbers, default=None)


def archive_versions(versions: EnvironmentVersions, name: str, *, up_to: int | None = None,
                     keep: Callable[[dict[str, str]], bool] = lambda tags: False,
                     drop_tags: tuple[str, ...] = ()) -> list[str]:
    """Archive an environment's active versions as `az ml environment archive --version` does (versions are
    never deleted: jobs may still name them), each without `drop_tags` (same content, only its tags change).
    Versions numbered above `up_to`, and those whose tags `keep` holds, stay as they are.
    Returns the versions archived."""
    archived = []
    for listed in versions.list(name):
        tags, number = version_tags(listed), _number(listed)
        if keep(tags) or (up_to is not None and (number is None or number > up_to)):
            continue
        version = str(listed.get("name"))
        dropped = {k: v for k, v in tags.items() if k not in drop_tags}
        versions.rewrite(name, version, tags=dropped if dropped != tags else None, archived=True)
        archived.append(version)
    return archived


def register_lock_version(versions: EnvironmentVersions, name: str, version: int, tags: dict[str, str], *,
                          description: str = "infra stack lock (do not use in jobs)") -> None:
    from azure.core.exceptions import HttpResponseError

    # a unique image tag makes every writer's content differ, so only one PUT of a version can succeed
    try:
        versions.register(name, str(version), {"image": f"{LOCK_IMAGE}-{uuid.uuid4().hex[:12]}", "tags": tags,
                                                "description": description})
    except HttpResponseError as exc:
        raise LockWriteRefused(exc) from exc
