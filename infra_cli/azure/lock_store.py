"""Where the stack lock lives: the versions of an Azure ML environment (state/lock.py says why), and beside it
the stack's lineage and serial (state/serial.py). This module is the SDK under both: read the latest version's
tags, register a version."""

from __future__ import annotations

import uuid
from typing import Any, Callable

from infra_cli.azure.errors import is_not_found

LOCK_IMAGE = "mcr.microsoft.com/azureml/infra-lock:none"  # never pulled: the version records the lock only


class LockWriteRefused(Exception):
    """Registering a lock version failed (taken by another writer, or a transient fault): `error` is Azure's."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def latest_lock_version(ml: Any, name: str) -> tuple[int, dict[str, str]] | None:
    """(version, tags) of the lock environment's latest version; None when it has none. Every version archived
    (a destroyed stack's records, archive_versions): the latest archived number, free (no tags), so the next
    version registered passes it (versions are immutable, archived ones too)."""
    try:
        env = ml.environments.get(name, label="latest")
    except Exception as exc:
        if not is_not_found(exc):
            raise
        archived = highest_archived_version(ml, name)
        return None if archived is None else (archived, {})
    return (int(env.version) if str(env.version).isdigit() else 0), dict(env.tags or {})


def highest_archived_version(ml: Any, name: str) -> int | None:
    """The highest numbered archived version of an environment; None when it has none. Read only where label
    latest found nothing (label latest sees active versions only). Archived versions only: an active version
    registered meanwhile by another writer is not taken for a free one, so registering past this number races
    with that writer as any registration does (the version is immutable: one of the two is refused)."""
    from azure.ai.ml.constants import ListViewType

    try:
        numbers = [int(v.version) for v in ml.environments.list(name=name, list_view_type=ListViewType.ARCHIVED_ONLY)
                   if str(v.version).isdigit()]
    except Exception as exc:
        if not is_not_found(exc):
            raise
        return None
    return max(numbers, default=None)


def archive_versions(ml: Any, name: str, *, up_to: int | None = None,
                     keep: Callable[[dict[str, str]], bool] = lambda tags: False,
                     drop_tags: tuple[str, ...] = ()) -> list[str]:
    """Archive an environment's active versions as `az ml environment archive --version` does (versions are
    never deleted: jobs may still name them), each first rewritten without `drop_tags` (same content, only its
    tags change). Versions numbered above `up_to`, and those whose tags `keep` holds, stay as they are.
    Returns the versions archived."""
    envs = ml.environments
    archived = []
    for listed in envs.list(name=name):
        number = int(listed.version) if str(listed.version).isdigit() else None
        if keep(dict(listed.tags or {})) or (up_to is not None and (number is None or number > up_to)):
            continue
        if drop_tags and any(k in (listed.tags or {}) for k in drop_tags):
            version = envs.get(name, version=listed.version)
            version.tags = {k: v for k, v in (version.tags or {}).items() if k not in drop_tags}
            envs.create_or_update(version)
        envs.archive(name, version=listed.version)
        archived.append(str(listed.version))
    return archived


def register_lock_version(ml: Any, name: str, version: int, tags: dict[str, str], *,
                          description: str = "infra stack lock (do not use in jobs)") -> None:
    from azure.ai.ml.entities import Environment
    from azure.core.exceptions import HttpResponseError

    # a unique image tag makes every writer's content differ, so only one PUT of a version can succeed
    try:
        ml.environments.create_or_update(Environment(
            name=name, version=str(version), image=f"{LOCK_IMAGE}-{uuid.uuid4().hex[:12]}", tags=tags,
            description=description))
    except HttpResponseError as exc:
        raise LockWriteRefused(exc) from exc
