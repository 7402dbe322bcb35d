"""Command-line values read without pydantic, for the plain types infra's commands take.

Typer 0.29 coerces every parameter value through a pydantic TypeAdapter it builds when the command runs:
importing pydantic and building the adapters is a fifth of `infra validate`'s start-up, and the stack model
no longer needs pydantic. A plain value (a path, a text, a decimal number inside its bounds, a list of those)
is read here with typer's own path checks (`coerce_cli_path`); anything else (a number out of range or
written oddly, a type not listed) goes to typer's own coercion, so every message and result stays typer's.
A typer whose internals differ keeps its own coercion for every parameter (tests/test_cli_params.py
fails then, so an upgrade is noticed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

try:   # typer 0.29's coercion internals; with another typer every parameter keeps typer's own coercion
    from typer._coercion import build_runtime_param
    from typer._param_types import coerce_cli_path   # typer's own path checks (exists, file_okay, readable...)
    _TYPER_COERCION = True
except ImportError:
    _TYPER_COERCION = False

_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")   # within 64 bits; longer text is typer's to refuse or read
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class _Undecided:
    """A value this module does not read itself: typer's own coercion reads it."""


UNDECIDED = _Undecided()


class PlainParam:
    """Stands where typer keeps a parameter's runtime coercion (`_runtime_param`), with its `coerce`."""

    def __init__(self, param: Any, typer_coercion: Any):
        self.param = param
        self._typer_coercion = typer_coercion   # () -> typer's own RuntimeParam, built only when needed

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:   # as typer: no value is () for a parameter that takes several, else None
            return () if param.multiple or param.nargs == -1 else None
        read = read_plain(value, self.param.type_descriptor, param, ctx)
        if read is not UNDECIDED:
            return read
        return self._typer_coercion().coerce(value, param=param, ctx=ctx)


def read_plain(value: Any, descriptor: Any, param: Any, ctx: Any) -> Any:
    """The value typer would give the command, or UNDECIDED."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if info.parser is not None or getattr(info, "click_type", None) is not None or descriptor.file_annotation:
        return UNDECIDED
    if get_origin(annotation) is list:
        (item,) = get_args(annotation) or (Any,)
        if not isinstance(value, (list, tuple)):
            return UNDECIDED
        items = [_read_one(v, item, info, param, ctx) for v in value]
        return UNDECIDED if any(i is UNDECIDED for i in items) else items
    return _read_one(value, annotation, info, param, ctx)


def _read_one(value: Any, annotation: Any, info: Any, param: Any, ctx: Any) -> Any:
    """Text from the command line, or a default already of the parameter's type (`--timeout`'s 120.0)."""
    if annotation is str and isinstance(value, str):
        return value
    if annotation is Path and info.path_type is None and isinstance(value, (str, Path)):
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    if annotation is int:
        if type(value) is int:
            return _bounded(value, info)
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            return _bounded(int(value), info)
    if annotation is float:
        if type(value) in (int, float):
            return _bounded(float(value), info)
        if isinstance(value, str) and _DECIMAL.fullmatch(value):
            return _bounded(float(value), info)
    return UNDECIDED


def _bounded(number: int | float, info: Any) -> Any:
    if getattr(info, "clamp", False) or number != number:   # clamping, and NaN against bounds, are typer's
        return UNDECIDED
    if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        return UNDECIDED   # typer says what the bounds are
    return number


def install(params: list[Any]) -> None:
    """Put a PlainParam where typer would build its pydantic coercion, for each parameter not yet coerced."""
    if not _TYPER_COERCION:
        return
    for param in params:
        if getattr(param, "_runtime_param", UNDECIDED) is not None or not hasattr(param, "type_descriptor"):
            continue
        descriptor = param.type_descriptor
        param._runtime_param = PlainParam(param, lambda d=descriptor: build_runtime_param(d))
