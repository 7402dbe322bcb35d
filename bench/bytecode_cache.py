"""The environment the benches run commands in: modules' bytecode cached, as for an installed package (pip
compiles it at install), in a private PYTHONPYCACHEPREFIX that the uncounted warm-up run fills. Without it, a
shell that sets PYTHONDONTWRITEBYTECODE makes a source checkout compile infra_cli in every run."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator


@contextlib.contextmanager
def cached_bytecode_env(base: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    # a private cache, never the tree's __pycache__ (other checkouts' edits must not meet stale files)
    cache = tempfile.mkdtemp(prefix="bench-pyc-")
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    try:
        yield env
    finally:
        shutil.rmtree(cache, ignore_errors=True)
