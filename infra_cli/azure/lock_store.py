"""Where the stack lock lives: the versions of an Azure ML environment (state/lock.py says why), and beside it
the stack's lineage and serial (state/serial.py). This module is the SDK under both: read the latest version's
tags, register a version."""

from __future__ import annotations

import uuid
from typing import Any

from infra_cli.azure.errors import is_not_found

LOCK_IMAGE = "mcr.microsoft.com/azureml/infra-lock:none"  # never pulled: the version records the lock only


class LockWriteRefused(Exception):
    """Registering a lock version failed (taken by another writer, or a transient fault): `error` is Azure's."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def latest_lock_version(ml: Any, name: str) -> tuple[int, dict[str, str]] | None:
    """(version, tags) of the lock environment's latest version; None when it has none."""
    try:
        env = ml.environments.get(name, label="latest")
    except Exception as exc:
        if not is_not_found(exc):
            raise
        return None
    return (int(env.version) if str(env.version).isdigit() else 0), dict(env.tags or {})


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
