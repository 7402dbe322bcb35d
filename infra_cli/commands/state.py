"""`infra show [PLANFILE|STACK]` and `infra state list STACK`, as Terraform has them.

`show PLANFILE` is offline (no azure.* import): the saved plan, rendered as `infra plan` printed it.
`show STACK` and `state list STACK` read what the stack owns in Azure now (infra's state is the ownership tags).
"""

import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

import typer

from infra_cli.commands.cli import Group, StackCommand
from infra_cli.commands.errors import EXIT_OK, fail
from infra_cli.commands.hints import rendered
from infra_cli.commands.run import READ_ONLY_NEEDS, stack_inputs, this_run
from infra_cli.commands.terminal import colour_for, print_diagnostics
from infra_cli.diagnostics import Diagnostic, DiagnosticError


def _show_plan(path: Path, as_json: bool, markdown: bool = False) -> None:
    from infra_cli.plan.planfile import binding_note, current_against_stack, plan_key, read_plan_file
    from infra_cli.commands.views.plan import render_plan

    try:   # its digest (and with INFRA_PLAN_KEY its HMAC) checked; a signed file shows unchecked without the key
        saved = read_plan_file(path, key=plan_key(os.environ), strict=False)
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    problem = current_against_stack(saved, path)
    if problem is not None and problem.severity == "error":
        raise fail([problem])
    plan = saved.plan
    if as_json:
        print(json.dumps(plan.to_json(), indent=2))
    elif markdown:   # for a pull request or a job summary (commands/views/plan_markdown.py)
        from infra_cli.commands.views.plan_markdown import render_markdown
        print_diagnostics(plan.diagnostics)
        print(render_markdown(plan, render_plan(plan, colour=False)))
    else:  # as `infra plan` printed it: its diagnostics on stderr, the plan on stdout
        print_diagnostics(plan.diagnostics)
        print(render_plan(plan, colour=colour_for(sys.stdout)))
    # where and when it was made; its serial is apply's to check (under the lock), not offline
    print_diagnostics(saved.warnings + ([problem] if problem is not None else []) + [binding_note(saved, path)])


def _read_state(stack: Path, local: bool):
    from infra_cli.commands.backend import provider_for
    from infra_cli.plan.owned import read_stack_state

    try:
        return read_stack_state(stack, backend=provider_for(local=local, anchor=stack),
                                inputs=stack_inputs(needs=READ_ONLY_NEEDS))
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)


def show(
    target: Optional[Path] = typer.Argument(None, metavar="PLANFILE|STACK",
                                            help="a plan saved by `infra plan --out`, or a stack file"),
    as_json: bool = typer.Option(False, "--json", help="the plan JSON, or the state as `terraform show -json`"),
    markdown: bool = typer.Option(False, "--markdown", help="a saved plan as Markdown, for a pull request"),
) -> None:
    """Show a saved plan, or what a stack owns in Azure now (read live from its tags)."""
    from infra_cli.plan.planfile import looks_like_plan_file

    if target is None:
        raise fail([Diagnostic("error", "show.no-argument", "infra keeps no state file: name what to show",
                               None, None, None, "`infra show PLANFILE` (saved by `infra plan STACK --out FILE`) "
                               "or `infra show STACK` for what the stack owns in Azure now")])
    if not target.exists():   # neither a plan nor a stack: say both forms, not only a stack's
        raise fail([Diagnostic("error", "show.not-found", f"no such file: {target}", str(target), None, None,
                               "pass a plan saved by `infra plan STACK --out FILE`, or a stack file")])
    if as_json and markdown:
        raise typer.BadParameter("--json and --markdown are two ways to print the plan: use one of them",
                                 param_hint="'--json' / '--markdown'")
    if looks_like_plan_file(target):
        _show_plan(target, as_json, markdown)
        raise typer.Exit(EXIT_OK)
    if markdown:
        raise fail([Diagnostic("error", "show.markdown-plan-only", f"--markdown shows a saved plan; {target} is a "
                               "stack", str(target), None, None, "`infra plan STACK --markdown`, or `infra plan STACK "
                               "--out FILE` then `infra show FILE --markdown`")])
    from infra_cli.commands.views.state import render_state, state_json

    state = _read_state(target, this_run().local)
    print(json.dumps(state_json(state), indent=2) if as_json else render_state(state))


def state_list(
    stack: Path = typer.Argument(..., metavar="STACK"),
) -> None:
    """List the addresses of the resources the stack owns in Azure (from their tags), one a line."""
    for address in _read_state(stack, this_run().local).addresses():
        print(address)


def output(
    stack: Path = typer.Argument(..., metavar="STACK"),
    name: Optional[str] = typer.Argument(None, metavar="[NAME]", help="only this output (shown even if sensitive)"),
    as_json: bool = typer.Option(False, "--json", "-json", help="as JSON: {NAME: {value, type, sensitive}}"),
    raw: bool = typer.Option(False, "--raw", "-raw", help="NAME's value bare (a string, number or bool), for scripts"),
) -> None:
    """Print the stack's output values, read live from Azure (as `terraform output`)."""
    from infra_cli.commands.backend import provider_for
    from infra_cli.commands.views.outputs import output_lines, outputs_json, raw_refusal
    from infra_cli.plan.outputs import no_outputs, read_outputs
    from infra_cli.stack.outputs import shown
    from infra_cli.stack.secret import revealed

    if raw and name is None:
        raise fail([Diagnostic("error", "output.raw-needs-name", "--raw prints one output: name it", None, None, None,
                               "`infra output STACK NAME --raw`")])
    try:   # what an output is built from beyond the live state, read_outputs adds (output_needs)
        loaded, values, left_out = read_outputs(stack, backend=provider_for(local=this_run().local, anchor=stack),
                                                inputs=stack_inputs(needs=READ_ONLY_NEEDS), name=name)
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    print_diagnostics(left_out)   # an output built from an unset variable: named, with how to set it
    if values is None:   # nothing of the stack exists: as Terraform with no state, no outputs (not every one null)
        if name is None:
            if as_json:
                print("{}")
            else:
                print_diagnostics([no_outputs(loaded, stack)])
            raise typer.Exit(EXIT_OK)
    if name is not None and name not in loaded.stack.outputs:
        raise fail([Diagnostic("error", "output.not-found", f"the stack has no output {name!r}", str(stack), None, None,
                               f"declared: {', '.join(sorted(loaded.stack.outputs)) or 'none'}")])
    if values is None:
        raise fail([no_outputs(loaded, stack, name)])
    if name is None:
        if as_json:
            print(json.dumps(outputs_json(values), indent=2))
        elif not values:
            print(f"warning: no outputs: {stack} declares no `outputs:`", file=sys.stderr)
        else:
            print("\n".join(output_lines(values)))
        raise typer.Exit(EXIT_OK)
    # asked for by name, as Terraform's `output NAME`: the one place a sensitive output is shown in clear
    value = revealed(values[name].value)
    if raw:
        why = raw_refusal(value)
        if why is not None:
            raise fail([Diagnostic("error", "output.raw", f"output {name!r} {why}: --raw prints only a string, "
                                   "number or bool", str(stack), None, None, "use --json for lists and maps")])
        print(value if isinstance(value, str) else shown(value))
    else:
        print(json.dumps(value) if as_json else shown(value))


def state_rm(
    address: str = typer.Argument(..., metavar="ADDR"),
    stack: Path = typer.Argument(..., metavar="STACK"),
) -> None:
    """Forget a resource: remove the stack's ownership tags from it, changing nothing else (terraform state rm)."""
    from infra_cli.apply.engine import forget_resource

    write_state(forget_resource, address, stack=stack, local=this_run().local)


def write_state(write: Callable[..., str], *words: str, stack: Path, local: bool) -> None:
    """`state rm` and `import`: one write of the stack's state under its lock (apply/engine.py forget_resource,
    import_resource, called with `words` then the stack), its message printed with this run's flags. The stack
    is read for its name, workspace and the one resource written (the engine adds it), so a variable used only
    elsewhere (another cluster's admin password) may stay unset, as for `state list`."""
    from infra_cli.commands.backend import provider_for

    try:
        print(rendered(write(*words, stack, backend=provider_for(local=local, anchor=stack),
                             inputs=stack_inputs(needs=READ_ONLY_NEEDS))))
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)


class _ShowCommand(StackCommand):
    local_help = "use the local emulator instead of Azure (STACK only)"   # a saved plan is read as it is


def register(app: typer.Typer) -> None:
    app.command(cls=_ShowCommand)(show)
    app.command(cls=StackCommand)(output)
    state_app = typer.Typer(cls=Group, help="Read what a stack owns in Azure (infra's state is the tags it writes).",
                            no_args_is_help=True)
    state_app.command("list", cls=StackCommand)(state_list)
    state_app.command("rm", cls=StackCommand)(state_rm)
    app.add_typer(state_app, name="state")

