"""Python processes for which some installed modules do not exist, as in a Python that never installed them.

`without_modules(folder, env)` writes a sitecustomize.py into `folder` and puts it first on PYTHONPATH: every
Python started with that environment (the CLI, the emulator's job processes, which inherit it) wraps the finders
of sys.meta_path so that a top-level name listed in INFRA_TEST_HIDDEN_MODULES (comma-separated, read when the
interpreter starts) is found by none of them. `import deepspeed` then raises ModuleNotFoundError("No module
named 'deepspeed'") and importlib.util.find_spec("deepspeed") returns None, exactly as where it is absent; a
job's environment_variables can set the variable for that job alone.
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "INFRA_TEST_HIDDEN_MODULES"

_SITECUSTOMIZE = '''\
import os
import sys

_HIDDEN = frozenset(filter(None, os.environ.get("INFRA_TEST_HIDDEN_MODULES", "").split(",")))


class _Hiding:
    """A finder of sys.meta_path that finds nothing under a hidden top-level name."""

    def __init__(self, inner):
        self._inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _HIDDEN:
            return None
        find = getattr(self._inner, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, attribute):
        return getattr(self._inner, attribute)


if _HIDDEN:
    sys.meta_path[:] = [_Hiding(finder) for finder in sys.meta_path]
'''


def without_modules(folder: Path, env: dict[str, str], *names: str) -> dict[str, str]:
    """`env` for Python processes that cannot find `names` (and whatever INFRA_TEST_HIDDEN_MODULES lists where
    they run, such as a job's environment_variables)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)
    if names:
        out[VARIABLE] = ",".join(names)
    return out
