"""validate: stack files -> diagnostics (offline)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Collection, Iterable

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, DiagnosticError, has_errors, says
from infra_cli.knowledge.names import name_rules
from infra_cli.stack.load import LoadedStack, SchemaErrors, load_stack
from infra_cli.stack.model import Stack
from infra_cli.stack.source import SourceMap, declared_names, load_yaml, read_stack_text
from infra_cli.stack.variables import Inputs, VarInput
from infra_cli.knowledge.skus import load_catalog
from infra_cli.validate.rules import run_rules


def validate_stack(loaded: LoadedStack) -> list[Diagnostic]:
    return [*loaded.source.warnings, *named_givers(judged_known(run_rules(loaded, load_catalog()), loaded.source),
                                                   loaded.source)]


def named_givers(diagnostics: list[Diagnostic], source: SourceMap) -> list[Diagnostic]:
    """Each diagnostic at a value given whole by a variable set outside the stack (--var, INFRA_VAR_, a var file)
    names where it came from: the stack's line alone would send the user to a line they did not write."""
    if not source.given:
        return diagnostics
    by_place = {source.position(p): source.given_by(p) for p in source.given}
    return [replace(d, message=d.message + by_place[(d.line, d.column)])
            if d.file == source.file and by_place.get((d.line, d.column)) and "(from " not in d.message else d
            for d in diagnostics]


def judged_known(diagnostics: list[Diagnostic], source: SourceMap | None) -> list[Diagnostic]:
    """`diagnostics` without the errors at an unknown value (an unset variable's placeholder, offline validate and
    the read-only commands: SourceMap.unknown): a rule that needs the value skips it, as Terraform's validate
    does an unknown; the variable.unknown warning says it was not judged."""
    if source is None or not source.unknown:
        return diagnostics
    at = source.unknown_positions()
    return [d for d in diagnostics if not (d.severity == "error" and d.file == source.file and
                                            (d.line, d.column) in at)]


def refers_to(d: Diagnostic, kind: str, name: str) -> bool:
    """Whether `d` is a reference to `kind`.`name` the stack does not declare (a distribution's cluster or
    environment, an output's `${cluster.NAME...}`)."""
    return (d.rule == "distribution.dangling-reference" and f"names {kind} {name!r}," in d.message or
            d.rule == "output.unknown-address" and d.message.endswith(f"the stack has no {kind}.{name}"))


def beside_schema_errors(exc: SchemaErrors) -> list[Diagnostic]:
    """The schema's errors and, in the same pass, what the rules find in the rest of the stack (SchemaErrors.
    partial): fixing the schema errors must not bring a second round of name and reference errors. A reference
    to an entry left out for its schema error is not dangling, and the names of the entries left out are
    still judged."""
    out = judged_known(list(exc.diagnostics), exc.source)
    if exc.partial is None:
        return out
    def refers_to_removed(d: Diagnostic) -> bool:   # one error at its source, not one more at each reference
        return any(refers_to(d, section[:-1], name) for section, names in exc.removed.items() for name in names)

    out.extend(d for d in validate_stack(exc.partial) if not refers_to_removed(d))
    left_out = SimpleNamespace(**{s: dict.fromkeys(exc.removed.get(s, ())) for s in ("clusters", "environments",
                                                                                       "distributions")})
    for r in name_rules():
        if r.field is None and r.section in exc.removed:   # the keys of a section: the entries' own names
            out.extend(exc.partial.source.diagnostic(path, r.rule_id, f"{r.what} {name!r} is not a name Azure accepts",
                                                     f"use {r.rule} ({r.source})", key=is_key)
                       for name, path, is_key in r.names_in(left_out) if not r.pattern.fullmatch(name))
    return sorted(out, key=lambda d: (d.line or 0, d.column or 0))


# the naming convention of a variables file (README "Variables"; the pre-commit hook passes it as any stacks/ YAML):
# NAME.vars.yaml, NAME.vars.yml or NAME.vars.json, as Terraform's NAME.tfvars
VARS_SUFFIXES = (".vars.yaml", ".vars.yml", ".vars.json")
_MAX_NEIGHBOURS = 200
_STACK_KEYS = frozenset(f.key for f in Stack.model_fields.values())   # a stack's top-level keys, as written   # the stack files beside a var file read to find the one that declares its keys


def _stacks_beside(path: Path, given: list[Path]) -> list[Path]:
    """The stack files a variables file may belong to: those given on the same command line, then the YAML files
    in its folder (bounded), in name order."""
    try:
        here = sorted(p for p in path.parent.iterdir() if p.suffix in (".yaml", ".yml") and p != path)
    except OSError:
        here = []
    seen, out = set(), []
    for p in [*given, *here[:_MAX_NEIGHBOURS]]:
        if p.resolve() != path.resolve() and p.resolve() not in seen:
            seen.add(p.resolve())
            out.append(p)
    return out


def variables_file(path: Path, given: list[Path]) -> list[Diagnostic] | None:
    """What validate says of a variables file (a mapping with no `stack:` whose keys a stack beside it declares,
    or a file named NAME.vars.yaml): "a variables file for STACK" and its values checked against that stack's
    declarations; None when `path` is not one (it is then judged as a stack)."""
    try:
        data, where = load_yaml(read_stack_text(path), str(path), {}, interpolate=False)
    except DiagnosticError:
        return None
    named = str(path).endswith(VARS_SUFFIXES)
    if not isinstance(data, dict) or "stack" in data or not (data or named):
        return None
    keys = {str(k) for k in data}

    def for_stack(stack: Path) -> list[Diagnostic]:
        found = [Diagnostic("info", "variable.file-for", f"a variables file for {stack}", str(path), 1, 1,
                            says("use it with ", NextStep(("infra", "plan"), (str(stack), "--var-file", str(path)))))]
        # its values, judged against the stack's declarations, and where the stack takes them (an error at the
        # stack's line that names this file: named_givers, SourceMap.given_by); a key the stack does not declare
        # is plan's warning at the key, with its did-you-mean (variable.undeclared)
        judged = validate_files([stack], Inputs((VarInput("var-file", str(path)),), unset_unknown=True), given=())
        return found + [d for d in judged if d.file == str(path) and d.severity in ("error", "warning") or
                        d.severity == "error" and f"from {path}:" in d.message]

    beside = [(stack, declared_names(stack)) for stack in _stacks_beside(path, given)]
    for stack, declared in beside:
        if declared is not None and keys <= declared:
            return for_stack(stack)
    if not named and keys & _STACK_KEYS:   # a stack that lost its `stack:` line: judged as a stack
        return None
    # a key misspelt (`node: 4`): the stack declaring most of its keys takes it, as the hook passes the file alone
    overlap = [(len(keys & declared), -i, stack) for i, (stack, declared) in enumerate(beside) if declared]
    best = max(overlap, default=None)
    if best is not None and best[0] > 0:
        return for_stack(best[2])
    return [where.diagnostic((), "variable.file", f"{path} " + ("is named as a variables file" if named else
                             "has none of a stack's keys") + ", and no stack beside it declares all of its keys "
                             f"({', '.join(sorted(keys)) or 'none'})",
                             says("if it is a variables file, declare its keys under the `variables:` of a stack in "
                                  "the same folder, or pass that stack with it (",
                                  NextStep(("infra", "validate"), ("STACK", str(path))),
                                  "); a file named NAME.vars.yaml is always read as one"))]


@dataclass(frozen=True)
class Validated:
    """What `infra validate` judged: the diagnostics, and how many files it read as stacks and as variables
    files (its summary counts them apart: a variables file is no stack)."""
    diagnostics: list[Diagnostic]
    stacks: int
    variables_files: int


def validate_files(paths: Iterable[Path], inputs: Inputs | None = None,
                   given: Iterable[Path] | None = None) -> list[Diagnostic]:
    """The diagnostics of each file: a stack's, or a variables file's (variables_file). `given`: the files a
    variables file's stack is looked for among first (default: `paths`); () judges each path as a stack."""
    return validate_each(paths, inputs, given).diagnostics


def validate_each(paths: Iterable[Path], inputs: Inputs | None = None,
                  given: Iterable[Path] | None = None) -> Validated:
    """validate_files, with the count of files judged as stacks and as variables files."""
    out: list[Diagnostic] = []
    paths = list(paths)
    variables_files = 0
    for path in paths:
        as_variables = None if given == () else variables_file(
            Path(path), [Path(p) for p in (paths if given is None else given) if p != path])
        if as_variables is not None:
            out.extend(as_variables)
            variables_files += 1
            continue
        try:
            out.extend(validate_stack(load_stack(path, inputs=inputs)))
        except SchemaErrors as exc:
            out.extend(beside_schema_errors(exc))
        except DiagnosticError as exc:
            out.extend(exc.diagnostics)
    return Validated(out, len(paths) - variables_files, variables_files)


def load_valid_stack(path: Path, *, judged_live: Collection[str] = (),
                     inputs: Inputs | None = None) -> tuple[LoadedStack, list[Diagnostic]]:
    """Load and validate; raise DiagnosticError if any rule reports an error (with the schema's, every error
    one pass finds: beside_schema_errors). Warnings come back.

    `judged_live`: rule ids the caller judges again against the live state (the plan's preflight), left out here;
    when other errors stop the caller before it reads the live state, they are reported as validate reports them
    (every error validate shows, the caller shows)."""
    try:
        loaded = load_stack(path, inputs=inputs)
    except SchemaErrors as exc:
        raise DiagnosticError(beside_schema_errors(exc)) from None
    found = validate_stack(loaded)
    diagnostics = [d for d in found if d.rule not in judged_live]
    if has_errors(diagnostics):
        raise DiagnosticError(found)
    return loaded, diagnostics
