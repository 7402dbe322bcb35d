"""The one reader of validators/*.yaml: cached, and one diagnostic (`knowledge.invalid`) for a broken file.

A typed loader is a function from the parsed YAML to frozen records. It reads rows inside `at(...)`, so
a missing key or a bad value deep in a file is reported with the row's path (`sizes.Standard_X.gpus`)
and, found again in the YAML text, its line. Users extend these files by hand (INFRA_VALIDATORS_DIR points
at their copy), so every fault must read as a message that says how to fix it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import validators_dir
from infra_cli.private_state import write_private_file

T = TypeVar("T")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: faster, and what the files were written for


class KnowledgeFault(Exception):
    """What is wrong, and where in the file (a path of keys and indexes from the document's root)."""

    def __init__(self, where: tuple, message: str):
        super().__init__(message)
        self.where = where
        self.message = message


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}" if exc.args else "a key is missing"
    if isinstance(exc, re.error):
        return f"bad regular expression: {exc}"
    return str(exc) or type(exc).__name__


@contextmanager
def at(*where: Any) -> Iterator[None]:
    """Read one part of a file: a fault inside is reported at `where` (joined with any deeper part)."""
    try:
        yield
    except KnowledgeFault as fault:
        raise KnowledgeFault(where + fault.where, fault.message) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, re.error) as exc:
        raise KnowledgeFault(where, _describe(exc)) from None


def fault(message: str, *where: Any) -> KnowledgeFault:
    return KnowledgeFault(where, message)


def mapping(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise KnowledgeFault((), f"{what} must be a mapping, not {type(value).__name__}")
    return value


def sequence(value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise KnowledgeFault((), f"{what} must be a list, not {type(value).__name__}")
    return value


def path_of(name: str) -> Path:
    return validators_dir() / name


def load(name: str, build: Callable[[Any], T], *, hint: str, json_cache: bool = False) -> T:
    """validators/NAME read by `build`, once per version of the file; a fault is a `knowledge.invalid`
    DiagnosticError whose hint is `hint` (what the file's rows need)."""
    path = path_of(name)
    try:
        stat = path.stat()
    except OSError as exc:
        raise invalid(path, None, f"cannot read {name}: {exc.strerror or exc}", hint) from None
    return _load(str(path), stat.st_mtime_ns, stat.st_size, build, hint, json_cache)


@lru_cache(maxsize=32)
def _load(path: str, _mtime_ns: int, _size: int, build: Callable[[Any], T], hint: str, json_cache: bool) -> T:
    file = Path(path)
    data = _parse(file, hint, json_cache)
    try:
        with at():
            return build(data)
    except KnowledgeFault as fault:
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in fault.where).replace(".[", "[")
        message = f"{file.name}: {where + ': ' if where else ''}{fault.message}"
        raise invalid(file, _line_of(file, fault.where), message, hint) from None


def invalid(path: Path, line: int | None, message: str, hint: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic(
        "error", "knowledge.invalid", message, str(path), line, None,
        f"{hint}; or unset INFRA_VALIDATORS_DIR to use the packaged knowledge"
        if os.environ.get("INFRA_VALIDATORS_DIR") else hint)])


def _parse(path: Path, hint: str, json_cache: bool) -> Any:
    cache = _cache_file(path) if json_cache else None
    if cache is not None:
        try:
            with open(cache, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            pass
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_Loader)
    except OSError as exc:
        raise invalid(path, None, f"cannot read {path.name}: {exc.strerror or exc}", hint) from None
    except UnicodeDecodeError as exc:
        raise invalid(path, None, f"{path.name} is not UTF-8 text ({exc.reason})", hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise invalid(path, mark.line + 1 if mark else None, f"{path.name} is not valid YAML: {problem}",
                      hint) from None
    except RecursionError:
        raise invalid(path, None, f"{path.name} nests too deeply to read", hint) from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar YAML cannot construct (a day 2025-13-45)
        raise invalid(path, None, f"{path.name} has a value YAML cannot read: {exc}", hint) from None
    if cache is not None:
        _write_cache(cache, data)
    return data


def _line_of(path: Path, where: tuple) -> int | None:
    """The line of the deepest part of `where` found in the file (only on the error path: parses again)."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in where:
        child = None
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if pair is not None:
                line, child = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


# ---- the parsed-file cache (skus.yaml: ~100 rows of YAML cost tens of milliseconds on every `validate`) ----

_CACHE_KEEP = 8  # versions kept: the packaged files and a few users' copies (tests make many in temp dirs)


def _cache_file(path: Path) -> Path | None:
    """The parsed rows kept as JSON in the user's cache, keyed by the file's path, size and mtime."""
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "infra"
        stat = path.stat()
    except (RuntimeError, KeyError, OSError):  # no home directory to be found: no cache
        return None
    if not base.is_absolute():  # a relative XDG_CACHE_HOME is invalid by the spec; never write under the cwd
        return None
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    version = hashlib.sha256(f"{stat.st_mtime_ns}|{stat.st_size}".encode()).hexdigest()[:16]
    return base / f"{path.stem}-{where}-{version}.json"


def _write_cache(cache: Path, data: Any) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # a fresh, randomly named file (O_EXCL|O_NOFOLLOW) renamed over the cache: a planted link is never followed
        write_private_file(cache, json.dumps(data, default=_json_day).encode("utf-8"), 0o644)
        _prune(cache)
    except (OSError, TypeError, ValueError):
        pass  # no cache (read-only home, odd values): parse every time


def _prune(cache: Path) -> None:
    """Drop earlier versions of this file's cache, and the least recently written beyond _CACHE_KEEP."""
    same_file = cache.name.rsplit("-", 1)[0] + "-"
    stem = cache.name.split("-", 1)[0]
    others = []
    for entry in cache.parent.glob(f"{stem}-*.json"):
        if entry == cache:
            continue
        if entry.name.startswith(same_file):
            entry.unlink(missing_ok=True)
        else:
            others.append(entry)
    if len(others) >= _CACHE_KEEP:
        others.sort(key=lambda e: e.stat().st_mtime_ns)
        for entry in others[:len(others) - _CACHE_KEEP + 1]:
            entry.unlink(missing_ok=True)


def _json_day(value: object) -> str:
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


def day(value: Any, what: str) -> datetime.date:
    """A YYYY-MM-DD day as YAML gives it (a date) or as the JSON cache keeps it (a string)."""
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"{what} must be a day (YYYY-MM-DD), not {value!r}")
