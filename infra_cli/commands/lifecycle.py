"""plan / apply / destroy / import / force-unlock: parse, call the engine, render, exit code.

Errors the commands do not handle (Azure's refusals, local OS errors, bugs) are reported by the CLI's one
wrapper (commands/errors.py report_error).
"""

import dataclasses
import json
import os
import shlex
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, List, Optional

import typer

from infra_cli.arguments import NextStep
from infra_cli.commands.cli import StackCommand
from infra_cli.commands.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, fail, smoke_interrupted
from infra_cli.commands.hints import rendered, rendered_diagnostic, step, step_words
from infra_cli.commands.run import READ_ONLY_NEEDS, interrupt_leaves, run_record, stack_inputs, this_run
from infra_cli.commands.state import write_state
from infra_cli.commands.terminal import Progress, colour_for, print_diagnostics, progress_stream
from infra_cli.diagnostics import Diagnostic, DiagnosticError

if TYPE_CHECKING:
    from infra_cli.plan.engine import PlanOutcome


def _print_plan_diagnostics(plan, *, summary: bool = True) -> None:
    from infra_cli.commands.views.plan import error_summary

    print_diagnostics(plan.diagnostics)
    said = error_summary(plan) if summary else None
    if said:   # beside the errors, on their stream
        print(said, file=sys.stderr)


def _confirm(question: str, auto_approve: bool) -> bool:
    """Terraform's approval: only `yes` approves, read from the terminal or, as Terraform does, from a pipe
    (`echo yes | infra apply`); anything else, end of input included, cancels."""
    if auto_approve:
        return True
    prompt = f"\n{question}\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: "
    stdin = sys.stdin
    if stdin is not None and stdin.isatty():
        try:
            return input(prompt).strip() == "yes"
        except (EOFError, KeyboardInterrupt):  # Ctrl-D / Ctrl-C at the prompt: a no, nothing was started
            print()
            return False
    print(prompt, end="", flush=True)
    try:
        answer = stdin.readline() if stdin is not None else ""
    except (OSError, ValueError):   # a closed or unreadable standard input answers nothing
        answer = ""
    print()
    if not answer:
        print("error: no answer on standard input; pass --auto-approve to apply without asking "
              "(or apply a saved plan file)", file=sys.stderr)
    return answer.strip() == "yes"


def _summary(result, verb: str = "Apply", stack: str = "STACK") -> int:
    status = "complete" if result.ok else ("interrupted" if result.interrupted else "failed")
    # Terraform's wording (internal/command/views/apply.go): a destroy counts only what it destroyed
    counts = (f"{result.destroyed} destroyed" if verb == "Destroy" else
              f"{f'{result.imported} imported, ' if result.imported else ''}{result.added} added, "
              f"{result.changed} changed, {result.destroyed} destroyed")
    print(f"\n{verb} {status}! Resources: {counts}.")
    if result.interrupted:
        stopped = (f"{len(result.not_started)} change(s) not started (listed below)" if result.not_started
                   else "every change had started")
        print(f"Interrupted (Ctrl-C): {stopped}; the changes already running were finished and the stack's lock "
              f"released. {step(NextStep(('infra', 'plan'), (stack,)))} shows what remains.", file=sys.stderr)
    if result.retired:
        print(f"infra's own records of the stack (its lock and smoke records: {', '.join(result.retired)}) archived; "
              "nothing in the workspace carries the stack's tag.")
    for f in result.failures:
        print(f"  failed: {f.address}: {f.code}: {f.message}", file=sys.stderr)
    for address in result.not_started:
        print(f"  not started: {address}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_INTERRUPTED if result.interrupted else EXIT_ERROR


def _run_smoke(outcome, jobs: list[str], stack: str) -> int:
    from infra_cli.commands.views.smoke_progress import smoke_progress
    from infra_cli.smoke.run import SmokeInterrupted, run_smoke

    names = [j.split(".", 1)[1] for j in jobs]
    try:
        verdicts = run_smoke(outcome.loaded, outcome.provider, outcome.smoke_inputs, names,
                             emit=smoke_progress(progress_stream(sys.stdout)))
    except SmokeInterrupted as exc:
        return smoke_interrupted(exc, stack)
    # An incomplete smoke (its framework is not installed where the job ran) leaves apply's work done: its one
    # line says what to install, and the smoke stays pending; `infra smoke` exits 1 for it.
    return EXIT_OK if all(v.passed or v.incomplete for v in verdicts) else EXIT_ERROR


def parallelism_option():
    """`--parallelism N` (`-parallelism=N`), as Terraform's plan, apply and destroy take it: how many reads (plan)
    or changes (apply, destroy) run at once."""
    return typer.Option(8, "--parallelism", metavar="N", min=1, max=64, help="changes in flight at once")


def target_option():
    """`--target ADDR` (`-target=ADDR`), as Terraform's plan, apply and destroy take it (repeatable): only this
    address, and what it depends on (or, destroying, what depends on it); every such run warns that targeting is
    in effect (plan/engine.py targeting_warning)."""
    return typer.Option([], "--target", metavar="ADDR",
                        help="only this address (and what it depends on; destroying, what depends on it)")


def plan_file(stack: Path, *, local: bool, generating: bool = False, **options) -> "PlanOutcome":
    """Load and validate the stack, build the clients and the provider (Azure, or the local emulator) and plan."""
    from infra_cli.commands.backend import build_provider
    from infra_cli.plan.engine import check_addresses, load_for_plan, plan_stack

    loaded, warnings = load_for_plan(stack, generating=generating, inputs=stack_inputs())
    check_addresses(loaded.file, options.get("targets") or [], options.get("replace") or [])
    provider = build_provider(loaded.stack.workspace, local=local, anchor=stack)
    return plan_stack(loaded, provider, warnings=warnings, **options)


def _generate_despite(errors: list[Diagnostic], stack: Path, path: Path, *, local: bool,
                      quiet: bool) -> list[Diagnostic]:
    """--generate-config-out on a stack whose plan stopped at errors: the stack still references what it imports
    (a distribution's cluster, an output), which the declarations to write would declare. The declarations are
    written all the same, as Terraform writes generated configuration from a plan that fails; the errors that
    remain are returned, without the import blocks' "declare it" ones the file answers. A stack that cannot be
    read, or whose import blocks cannot be, writes nothing: its errors come back as they were."""
    from infra_cli.commands.backend import build_provider
    from infra_cli.commands.views.plan import generated_config_summary
    from infra_cli.plan.generate import about_generated, undeclared_imports
    from infra_cli.stack.load import SchemaErrors, load_stack

    try:
        loaded = load_stack(stack, inputs=stack_inputs())
    except (SchemaErrors, DiagnosticError):
        return errors
    if not undeclared_imports(loaded):
        return errors
    written, text = _generate_config(loaded, build_provider(loaded.stack.workspace, local=local, anchor=stack),
                                     path, quiet=quiet)
    if not written:
        return errors
    if not quiet:
        print(rendered(generated_config_summary(written, str(path), str(stack))) + "\n")
    # the references the file answers once merged point at it, and say so
    return about_generated([d for d in errors if d.rule != "import.undeclared"], text, path, stack)


def _generate_config(loaded, provider, path: Path, *, quiet: bool) -> tuple[list[str], str]:
    """Write the declarations of the import blocks' undeclared targets to `path`; their addresses (the plan's
    view says what was written and what to do next) and the text written."""
    from infra_cli.plan.generate import generate_config, write_generated

    text, addresses = generate_config(loaded, provider)
    if not addresses:
        if not quiet:
            print("No import block names a resource the stack does not declare: nothing to generate.\n")
        return [], text
    try:
        write_generated(path, text)
    except OSError as exc:
        raise DiagnosticError([Diagnostic("error", "generate-config.write", f"cannot write {path}: {exc.strerror}",
                                          str(path), None, None, "name a new file in a folder you can write")])
    return addresses, text


def plan(
    stack: Path = typer.Argument(..., metavar="STACK"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="save the plan for `infra apply FILE`"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON (shape of terraform show -json)"),
    detailed_exitcode: bool = typer.Option(False, "--detailed-exitcode", help="exit 2 when there are changes"),
    target: List[str] = target_option(),
    replace: List[str] = typer.Option([], "--replace", "-replace", metavar="ADDR",
                                      help="replace this cluster (-/+), or give this environment a new version"),
    refresh_only: bool = typer.Option(False, "--refresh-only", help="report drift: changes made outside infra"),
    destroy: bool = typer.Option(False, "--destroy", help="plan to destroy everything the stack owns"),
    check_images: bool = typer.Option(False, "--check-images",
                                      help="read custom images' layers and check their `requires:`"),
    generate_config_out: Optional[Path] = typer.Option(
        None, "--generate-config-out", "-generate-config-out", metavar="FILE",
        help="write the declarations of import blocks' undeclared targets, read from Azure, to this new file"),
    parallelism: int = parallelism_option(),
    policy: List[str] = typer.Option([], "--policy", metavar="PATH", help="Rego policies (a .rego file or a folder) "
                                     "judging the plan; default: the stack's policy/ folder; `none`: no policies"),
    namespace: List[str] = typer.Option([], "--namespace", metavar="PACKAGE", help="the policies' package (main)"),
    markdown: bool = typer.Option(False, "--markdown", help="print the plan as Markdown, for a pull request"),
) -> None:
    """Show what apply would change, and whether it can succeed (size, region, quota)."""
    from infra_cli.plan.planfile import plan_key, write_plan_file
    from infra_cli.commands.views.outputs import plan_outputs, planned_outputs
    from infra_cli.commands.views.plan import generated_config_summary, render_plan
    from infra_cli.stack.variables import recorded_values
    local = this_run().local

    if refresh_only and destroy:
        raise typer.BadParameter("--refresh-only reports drift and --destroy plans deletions: use one of them",
                                 param_hint="'--refresh-only' / '--destroy'")
    if as_json and markdown:
        raise typer.BadParameter("--json and --markdown are two ways to print the plan: use one of them",
                                 param_hint="'--json' / '--markdown'")
    mode = "destroy" if destroy else "refresh-only" if refresh_only else "normal"
    try:
        key = plan_key(os.environ) if out is not None else None   # an unusable key is said before planning
        if generate_config_out is not None:
            from infra_cli.plan.generate import refuse_existing
            refuse_existing(generate_config_out)
        try:
            outcome = plan_file(stack, local=local, mode=mode, targets=list(target), check_images=check_images,
                                replace=list(replace), generating=generate_config_out is not None,
                                parallelism=parallelism)
        except DiagnosticError as exc:   # generating: the declarations are written all the same
            if generate_config_out is None:
                raise
            raise DiagnosticError(_generate_despite(exc.diagnostics, stack, generate_config_out, local=local,
                                                    quiet=as_json)) from None
        generated, text = _generate_config(outcome.loaded, outcome.provider, generate_config_out, quiet=as_json) \
            if generate_config_out is not None else ([], "")
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    p = outcome.plan
    if generated and generate_config_out is not None:   # the placeholders the generated file holds, at its lines
        from infra_cli.plan.generate import about_generated
        p.diagnostics.extend(about_generated([], text, generate_config_out, stack))
    outputs = planned_outputs(p, outcome.outputs)   # none for a plan with errors (before policies, as the JSON's)
    document = _plan_document(outcome)
    judged = _policy_diagnostics(document, stack, policy, namespace)
    p.diagnostics.extend(judged)
    document["diagnostics"].extend(rendered_diagnostic(d).to_json() for d in judged)
    if as_json:
        print(json.dumps(document, indent=2))
    elif markdown:
        from infra_cli.commands.views.plan_markdown import render_markdown
        _print_plan_diagnostics(p)
        print(render_markdown(p, render_plan(p, colour=False, generated=len(generated)) + plan_outputs(outputs)))
    else:
        _print_plan_diagnostics(p)
        _print_rules_disabled(outcome)
        print(render_plan(p, colour=colour_for(sys.stdout), generated=len(generated)))
        print(plan_outputs(outputs), end="")
        if generated:
            print("\n" + rendered(generated_config_summary(generated, str(generate_config_out), str(stack))))
    if p.has_errors():
        raise typer.Exit(EXIT_ERROR)
    if out is not None:
        write_plan_file(out, p, outcome.loaded.path, list(target), key=key,
                        variables=recorded_values(outcome.loaded.variables), replace=list(replace), local=local)
        if not as_json:   # beside a Markdown plan, on stderr: stdout is the Markdown alone
            apply_it = step_words(NextStep(("infra", "apply"), (str(out),)), this_run().without_variables())
            print(f"\nSaved the plan to {out}. To perform exactly these actions: {apply_it}",
                  file=sys.stderr if markdown else sys.stdout)
    # a pending smoke is a change apply makes; a generated declaration, an import once merged
    has_changes = bool(p.changes or p.drift or p.smoke_jobs or generated)
    raise typer.Exit(EXIT_CHANGES if detailed_exitcode and has_changes else EXIT_OK)


def _plan_document(outcome) -> dict:
    """The plan as `plan --json` prints it (and as policies read it)."""
    from infra_cli.commands.views.outputs import plan_outputs_json, planned_outputs

    document = outcome.plan.to_json()
    document["diagnostics"] = [rendered_diagnostic(d).to_json() for d in outcome.plan.diagnostics]
    outputs = planned_outputs(outcome.plan, outcome.outputs)
    if outputs:
        document["output_changes"] = plan_outputs_json(outputs)
    disabled = _rules_disabled(outcome)
    if disabled:   # only where the stack switches rules off: any other plan's JSON is as it was
        document["rules_disabled"] = disabled
    return document


def _rules_disabled(outcome) -> list[dict[str, str]]:
    """The rules the stack switched off (`rules:`), each {id, reason}."""
    from infra_cli.validate.rules.switches import rules_disabled

    return rules_disabled(outcome.loaded.stack)


def _print_rules_disabled(outcome) -> None:
    """Beside the plan: the rules whose warnings this stack does not see, and why (nothing when it switched none)."""
    for r in _rules_disabled(outcome):
        print(f"Rule {r['id']} is switched off by this stack: {r['reason']}")


def _policy_diagnostics(document: dict, stack: Path, given: List[str], namespaces: List[str]) -> list[Diagnostic]:
    """The Rego policies' results on the plan document (plan/policy.py): `--policy`, else the stack's policy/."""
    from infra_cli.plan.policy import check_plan, policy_limits

    try:
        limits = policy_limits(os.environ)
    except ValueError as exc:
        raise fail([Diagnostic("error", "policy.limits", str(exc), None, None, None, "unset it, or give a number")])
    return check_plan(document, stack, given, namespaces, limits)


def apply(
    source: Path = typer.Argument(..., metavar="STACK|PLANFILE"),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="apply without asking"),
    parallelism: int = parallelism_option(),
    no_smoke: bool = typer.Option(False, "--no-smoke", help="do not run the smoke jobs after the changes"),
    target: List[str] = target_option(),
    replace: List[str] = typer.Option([], "--replace", "-replace", metavar="ADDR",
                                      help="replace this cluster (-/+), or give this environment a new version"),
) -> None:
    """Make Azure match the stack (or exactly a saved plan), then prove it with smoke jobs."""
    _apply_or_destroy(source, auto_approve, parallelism, no_smoke, this_run().local, destroy=False, replace=list(replace),
                      targets=list(target))


def destroy(
    stack: Path = typer.Argument(..., metavar="STACK"),
    auto_approve: bool = typer.Option(False, "--auto-approve", help="destroy without asking"),
    parallelism: int = parallelism_option(),
    target: List[str] = target_option(),
) -> None:
    """Delete everything that carries this stack's tag (respecting lifecycle.prevent_destroy)."""
    _apply_or_destroy(stack, auto_approve, parallelism, True, this_run().local, destroy=True, targets=list(target))


def import_(
    address: str = typer.Argument(..., metavar="ADDR"),
    azure_name: str = typer.Argument(..., metavar="AZURE_NAME"),
    stack: Path = typer.Argument(..., metavar="STACK"),
) -> None:
    """Adopt an existing Azure resource into the stack (tags it; changes nothing else)."""
    from infra_cli.apply.engine import import_resource

    write_state(import_resource, address, azure_name, stack=stack, local=this_run().local)


def force_unlock(
    lock_id: str = typer.Argument(..., metavar="LOCK_ID"),
    stack: Optional[Path] = typer.Argument(None, metavar="STACK"),
    force: bool = typer.Option(False, "--force", help="clear it even though its holder still runs on this machine"),
) -> None:
    """Clear a stale stack lock (left by a killed apply).

    LOCK_ID is the ID the "locked" message shows (`infra force-unlock STACK` says it). Refused for another ID,
    and while the holder still runs on this machine unless --force is given."""
    from infra_cli.apply.unlock import force_unlock_stack
    from infra_cli.commands.backend import provider_for

    wanted: str | None = lock_id   # None: `infra force-unlock STACK` clears nothing, it says the lock's ID
    if stack is None:          # `infra force-unlock STACK`, as before lock IDs: the stack alone
        if not Path(lock_id).exists() and Path(lock_id).suffix not in (".yaml", ".yml"):
            raise fail([Diagnostic("error", "lock.stack-required", f"force-unlock {lock_id[:80]!r}: which stack's "
                                   "lock? (no such stack file)", None, None, None, "name the stack after the ID: "
                                   f"`infra force-unlock {shlex.quote(lock_id[:80])} STACK`")])
        wanted, stack = None, Path(lock_id)
    elif Path(lock_id).is_file() and not stack.is_file():   # `infra force-unlock STACK LOCK_ID`: as meant
        wanted, stack = str(stack), Path(lock_id)
    try:
        info = force_unlock_stack(stack, wanted, force=force, backend=provider_for(local=this_run().local, anchor=stack),
                                  inputs=stack_inputs(needs=READ_ONLY_NEEDS))   # where the lock is, nothing else
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    print(f"Cleared the lock held by {info.holder} since {info.since} (lock ID {info.lock_id})." if info.held
          else "The stack was not locked.")


def _apply_or_destroy(source: Path, auto_approve: bool, parallelism: int, no_smoke: bool, local: bool,
                      *, destroy: bool, replace: Sequence[str] = (), targets: tuple[str, ...] | list[str] = ()) -> None:
    from infra_cli.apply.engine import apply_outcome, prepare_from_plan_file
    from infra_cli.commands.backend import provider_for
    from infra_cli.plan.planfile import is_plan_file, made_locally, plan_key, saved_stack_path
    from infra_cli.commands.views.plan import render_plan
    from infra_cli.commands.views.outputs import apply_outputs, plan_outputs
    from infra_cli.plan.outputs import live_outputs

    interrupt_leaves("nothing was changed (it was reading the stack and Azure)")
    try:
        if not destroy and is_plan_file(source):
            if replace:
                raise DiagnosticError([Diagnostic(
                    "error", "apply.plan-replace", "a saved plan takes no --replace: it replaces what it was made to",
                    str(source), None, None, "make the plan with it: `infra plan STACK --replace ADDR --out FILE`")])
            if targets:
                raise DiagnosticError([Diagnostic(
                    "error", "apply.plan-target", "a saved plan takes no --target: it changes what it was made to",
                    str(source), None, None, "make the plan with it: `infra plan STACK --target ADDR --out FILE`")])
            if this_run().variables:
                raise DiagnosticError([Diagnostic(
                    "error", "apply.plan-variables", "a saved plan takes no --var or --var-file: it was made with "
                    "its variables' values, and is applied with them", str(source), None, None,
                    "drop the --var/--var-file options, or make a new plan with them: `infra plan STACK --var ... --out FILE`")])
            # a plan made with --local is applied to the local Azure it was made against, --local or not
            # (Terraform's saved plan carries its backend); one made against Azure is refused by --local
            if not local and made_locally(source):
                local = True
                record = run_record()   # the commands the views name from now on carry --local
                if record is not None:
                    record.args = dataclasses.replace(record.args, local=True)
            backend = provider_for(local=local, anchor=saved_stack_path(source) or source)
            outcome: PlanOutcome = prepare_from_plan_file(source, backend=backend, key=plan_key(os.environ), local=local)
            approved = True
        else:
            outcome = plan_file(source, local=local, mode="destroy" if destroy else "normal", replace=list(replace),
                                targets=list(targets))
            # the stack's policy/ folder judges what apply would do, as it judges `infra plan`
            outcome.plan.diagnostics.extend(_policy_diagnostics(_plan_document(outcome), source, [], []))
            _print_plan_diagnostics(outcome.plan, summary=False)   # "Apply refused" below says it
            if outcome.plan.has_errors():  # nothing will happen: the errors say why, a plan would only distract
                print(f"\n{'Destroy' if destroy else 'Apply'} refused: fix the errors above; nothing was changed.",
                      file=sys.stderr)
                raise typer.Exit(EXIT_ERROR)
            print(render_plan(outcome.plan, colour=colour_for(sys.stdout)))
            print(plan_outputs(outcome.outputs), end="")
            if not outcome.plan.changes and not (outcome.plan.smoke_jobs and not destroy):
                raise typer.Exit(EXIT_OK)
            if not outcome.plan.changes and no_smoke:
                print(f"Smoke jobs not run (--no-smoke): {', '.join(outcome.plan.smoke_jobs)}")
                raise typer.Exit(EXIT_OK)
            verb = "destroy all resources of" if destroy else "perform these actions on"
            approved = _confirm(f"Do you want infra to {verb} stack {outcome.plan.stack!r}?", auto_approve)
        if not approved:
            print("Destroy cancelled." if destroy else "Apply cancelled.")
            raise typer.Exit(EXIT_ERROR)
        result = None
        stack = outcome.loaded.file   # as given; a saved plan's, the stack it recorded
        if outcome.plan.changes:  # only pending smoke jobs: nothing to lock or change, just run them
            # said after the command (root.py), with --local but not the run's --var, as it always was
            shows = step(NextStep(("infra", "plan"), (stack,)), this_run().without_variables())
            interrupt_leaves(f"the changes it had started go on in Azure, the rest were not started; {shows} shows "
                             "what remains")
            with Progress() as progress:
                result = apply_outcome(outcome, parallelism=parallelism, emit=progress,
                                       operation="destroy" if destroy else "apply")
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    code = _summary(result, "Destroy" if destroy else "Apply", stack) if result is not None else EXIT_OK
    if code == EXIT_OK and not no_smoke and outcome.plan.smoke_jobs:
        code = _run_smoke(outcome, outcome.plan.smoke_jobs, stack)
    if code == EXIT_OK and not destroy and outcome.loaded.stack.outputs:   # as Terraform's, read live
        print(apply_outputs(live_outputs(outcome.loaded, outcome.provider)), end="")
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(cls=StackCommand)(plan)
    app.command(cls=StackCommand)(apply)
    app.command(cls=StackCommand)(destroy)
    app.command("import", cls=StackCommand)(import_)
    app.command("force-unlock", cls=StackCommand)(force_unlock)
