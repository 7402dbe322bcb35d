"""Command-line values read without pydantic (infra_cli/commands/params.py) give what typer's own coercion
gives: the same value, or typer's own error. Checked on every parameter of every command, against typer's
coercion built for the same parameter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer._click import Context
from typer._coercion import build_runtime_param

from infra_cli.commands import params
from infra_cli.commands.main import app

ROOT = Path(__file__).resolve().parent.parent


def _parameters() -> list[tuple[str, object, object]]:
    """(command path, click command, parameter) for every parameter of every command, --help included."""
    out = []

    def walk(command, path):
        ctx = Context(command, info_name=path)
        out.extend((path, command, p) for p in command.get_params(ctx))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")
    walk(typer.main.get_command(app), "infra")
    return out


PARAMETERS = _parameters()
VALUES = ["stacks/ib-a100.yaml", "", "-", "x", "0", "1", "7", "64", "65", "-3", "+4", " 5", "5 ", "1e3", "0.5", "1.0",
          ".5", "5.", "1_000", "nan", "inf", "-0.0", "0x10", "١٢", "true", "no", "ä/ö", "..", "/", str(ROOT / "stacks"),
          # past 64 bits, past Python's 4300-digit limit on reading an int, past a float's range
          "9" * 19, "-" + "9" * 19, "9" * 5000, "9" * 400, "1e999", "-1e-999"]


def _outcome(coercion, value, param, ctx):
    try:
        return "value", coercion.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as exc:
        return "error", exc.format_message()


def test_every_command_parameter_is_listed():
    types = {repr(p.type_descriptor.annotation) for _, _, p in PARAMETERS}
    # the plain types the fast reading covers (anything else goes to typer's own coercion)
    assert {"<class 'str'>", "<class 'pathlib.Path'>", "<class 'int'>", "<class 'float'>", "<class 'bool'>",
            "typing.List[pathlib.Path]", "typing.List[str]"} <= types, types


@pytest.mark.parametrize("value", VALUES, ids=lambda v: v if len(v) <= 20 else f"{v[:6]}..({len(v)} characters)")
def test_plain_reading_equals_typers(value):
    checked = 0
    for path, command, param in PARAMETERS:
        ctx = Context(command, info_name=path)
        multi = param.multiple or param.nargs == -1
        given = (value, value) if multi else value
        plain = params.PlainParam(param, lambda d=param.type_descriptor: build_runtime_param(d))
        theirs = build_runtime_param(param.type_descriptor)
        assert _outcome(plain, given, param, ctx) == _outcome(theirs, given, param, ctx), (path, param.name, given)
        checked += 1
    assert checked == len(PARAMETERS) > 50


def test_defaults_and_typed_values_are_what_typer_gives():
    # defaults reach the coercion as they are written (`--timeout`'s 120.0), not as text
    checked = 0
    for path, command, param in PARAMETERS:
        ctx = Context(command, info_name=path)
        multi = param.multiple or param.nargs == -1
        for value in (param.default, 0, 7, 2.5, float("nan"), float("inf"), True, Path("stacks"), 10 ** 30):
            if value is None or callable(value):
                continue
            given = tuple(value) if multi and isinstance(value, (list, tuple)) else (value,) if multi else value
            plain = params.PlainParam(param, lambda d=param.type_descriptor: build_runtime_param(d))
            theirs = build_runtime_param(param.type_descriptor)
            mine, typers = _outcome(plain, given, param, ctx), _outcome(theirs, given, param, ctx)
            same_nan = all(isinstance(v, float) and v != v for v in (mine[1], typers[1]))
            assert mine == typers or same_nan, (path, param.name, given, mine, typers)
            checked += 1
    assert checked > 200


def test_no_value_is_what_typer_gives():
    for path, command, param in PARAMETERS:
        ctx = Context(command, info_name=path)
        plain = params.PlainParam(param, lambda d=param.type_descriptor: build_runtime_param(d))
        assert plain.coerce(None, param, ctx) == build_runtime_param(param.type_descriptor).coerce(None, param, ctx)


def test_plain_values_are_read_here_and_odd_ones_by_typer():
    # what the fast reading decides itself (no pydantic), and what it leaves to typer
    descriptor = next(p for _, _, p in PARAMETERS if p.name == "parallelism").type_descriptor   # int, 1..64
    assert params.read_plain("8", descriptor, None, None) == 8
    for odd in ("0", "65", " 8", "8.0", "x"):
        assert params.read_plain(odd, descriptor, None, None) is params.UNDECIDED, odd


def test_installed_typer_uses_the_plain_reading():
    # An upgrade of typer that moves its coercion internals would silently bring pydantic back on every
    # command's start-up: this fails instead.
    assert params.build_runtime_param is not None and params.coerce_cli_path is not None
    command = typer.main.get_command(app).commands["validate"]
    ctx = command.make_context("validate", ["stacks/ib-a100.yaml"])
    assert all(isinstance(p._runtime_param, params.PlainParam) for p in command.get_params(ctx)
               if p.type_descriptor.annotation is not bool)
    assert ctx.params["stacks"] == [Path("stacks/ib-a100.yaml")]


def test_validate_does_not_build_typers_pydantic_coercion(tmp_path):
    code = ("import sys; sys.argv = ['infra', 'validate', 'stacks/ib-a100.yaml', '--json']\n"
            "from infra_cli.commands.main import main\n"
            "try: main()\n"
            "except SystemExit: pass\n"
            "print('typer._adapters' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr[-2000:]
