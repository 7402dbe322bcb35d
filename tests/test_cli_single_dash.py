"""Terraform's single-dash spellings (`-out=p.plan`, `-json`, `-parallelism 4`) of every long option of every
command, read as the double-dash ones (infra_cli/commands/cli.py terraform_spellings); an unknown option gets
only close suggestions. Every option has a help text. Walks typer's command tree as tests/test_cli_params.py
does, so an option added later is covered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from infra_cli.commands.main import app
from infra_cli.commands.cli import command_line, terraform_spellings

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[tuple[str, object]]:
    out = []

    def walk(command, path):
        out.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")
    walk(typer.main.get_command(app), "infra")
    return out


COMMANDS = _commands()
OPTIONS = [(path, command, option) for path, command in COMMANDS for option in command.get_params(
    typer.main._click.Context(command, info_name=path)) if option.param_type_name == "option"]
# a value each kind of option accepts (a path that exists: some options check it)
VALUES = {"str": "x", "Path": "stacks", "int": "3", "float": "0.5", "List[str]": "x"}


def _value(option) -> str:
    annotation = option.type_descriptor.annotation
    name = repr(annotation).replace("typing.", "") if "typing." in repr(annotation) else annotation.__name__
    return VALUES[name]


def _parsed(command, path: str, args: list[str]) -> dict:
    try:
        return command_line(command.make_context(path, list(args), resilient_parsing=True))
    except typer.Exit:     # an eager option that answers at once (--version): read as that option
        return {"exited": True}


def _longs(option) -> list[str]:
    return [o for o in option.opts + option.secondary_opts if o.startswith("--")]


def test_every_command_and_option_is_walked():
    assert len(COMMANDS) >= 20 and len(OPTIONS) >= 60
    assert {"infra plan", "infra apply", "infra image check", "infra emulator serve"} <= {p for p, _ in COMMANDS}


@pytest.mark.parametrize("path, command, option", OPTIONS, ids=[f"{p} {_longs(o)[0]}" for p, _, o in OPTIONS])
def test_single_dash_spelling_reads_as_the_double_dash_one(path, command, option):
    for long in _longs(option):
        single = long[1:]
        if option.is_flag:
            spellings = [([long], [single])]
        else:
            v = _value(option)
            spellings = [([long, v], [single, v]), ([f"{long}={v}"], [f"{single}={v}"])]
        options = command.get_params(typer.main._click.Context(command, info_name=path))
        for double_args, single_args in spellings:
            group = hasattr(command, "commands")
            assert terraform_spellings(options, single_args, group=group) == double_args, (path, single_args)
            # --help, the completion options, --var/--var-file (read in order by Command): no value of their own
            if not option.expose_value and option.name not in ("local", "no_color"):
                continue
            want = _parsed(command, path, double_args)
            assert _parsed(command, path, single_args) == want, (path, single_args)
            if option.callback is None:   # an eager one (--version) answers through its callback, not a value
                assert want != _parsed(command, path, []), (path, double_args)   # the option was read


def test_values_that_look_like_options_and_what_follows_double_dash_stay_as_written():
    plan = next(c for p, c in COMMANDS if p == "infra plan")
    params = _parsed(plan, "infra plan", ["--target", "-json", "s.yaml", "-local"])
    assert params["target"] == ["-json"] and params["as_json"] is False and params["local"] is True
    params = _parsed(plan, "infra plan", ["-out=-json", "--", "-local"])
    assert str(params["out"]) == "-json" and params["local"] is False and str(params["stack"]) == "-local"
    # a group reads only its own options: the subcommand's are the subcommand's
    root = typer.main.get_command(app)
    options = root.get_params(typer.main._click.Context(root, info_name="infra"))
    assert terraform_spellings(options, ["-version", "plan", "-version"], group=True) == \
        ["--version", "plan", "-version"]
    assert terraform_spellings(options, ["--install-completion", "-version"], group=True) == \
        ["--install-completion", "-version"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_terraform_spellings_on_the_command_line(tmp_path):
    r = _cli("plan", "stacks/ib-a100.yaml", "-out=" + str(tmp_path / "p.plan"), "-json", "-detailed-exitcode",
             "-target=cluster.a100", "-parallelism=2", "-local")
    assert "No such option" not in r.stderr and r.stdout.lstrip().startswith("{"), r.stderr
    # plan takes Terraform's -parallelism with apply's bounds (it was refused as an unknown option)
    r = _cli("plan", "-parallelism=0", "-local", "stacks/nope.yaml")
    assert r.returncode == 1 and "No such option" not in r.stderr and "greater than or equal to 1" in r.stderr, r.stderr
    assert _cli("-version").stdout.startswith("infra v")
    r = _cli("apply", "-auto-approve", "-parallelism=2", "-no-smoke", "-local", "stacks/nope.yaml")
    assert r.returncode == 1 and "stack.not-found" in r.stderr and "No such option" not in r.stderr, r.stderr


@pytest.mark.parametrize("typed, shown, suggested", [
    ("--bogus", "--bogus", None),                 # nothing close: no unrelated suggestion (was --out)
    ("-bogus", "-bogus", None),                   # named as typed (click read it as -b)
    ("--detailed-exitcod", "--detailed-exitcod", "--detailed-exitcode"),
    ("-refresh", "-refresh", "--refresh-only"),   # the start of one
    ("--jsn", "--jsn", "--json"),
])
def test_an_unknown_option_gets_only_close_suggestions(typed, shown, suggested):
    r = _cli("plan", "stacks/ib-a100.yaml", typed)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("Error:")]
    assert line == f"Error: No such option: {shown}" + (f" (Possible options: {suggested})" if suggested else ""), line


@pytest.mark.parametrize("path, command, option", OPTIONS, ids=[f"{p} {_longs(o)[0]}" for p, _, o in OPTIONS])
def test_every_option_has_help_text(path, command, option):
    assert (option.help or "").strip(), f"{path} {_longs(option)[0]} has no help text"
