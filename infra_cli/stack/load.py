"""load: stack file -> Stack model, or diagnostics pointing at file:line:column."""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.stack.field_errors import ValidationError
from infra_cli.stack.fields import Model
from infra_cli.stack.distribution import flatten_distribution
from infra_cli.stack.model import Stack
from infra_cli.stack.bounded_yaml import read_stack_text
from infra_cli.stack.source import SourceMap, load_yaml, short_repr
from infra_cli.stack.secret import contains_secret
from infra_cli.stack.variables import Inputs


class SchemaErrors(DiagnosticError):
    """The stack breaks the schema (`diagnostics`). `partial`: the stack without what the schema refused (an
    unknown key dropped; an entry of clusters, environments or distributions with a bad value left out, its name
    in `removed`), so the rules can still judge the rest in the same pass; None where the rest cannot be read (a
    bad workspace, a section that is not a mapping)."""

    def __init__(self, diagnostics: list[Diagnostic], partial: "LoadedStack | None" = None,
                 removed: dict[str, set[str]] | None = None, source: SourceMap | None = None):
        super().__init__(diagnostics)
        self.partial, self.removed, self.source = partial, removed or {}, source
        self.partial_stack: Stack | None = None   # what parse_stack could read; load_stack makes it `partial`


_ENTRY_SECTIONS = ("clusters", "environments", "distributions")


def _without_refused(data: dict, errors: list, removed: dict[str, set[str]]) -> dict | None:
    """`data` without what the schema refused (SchemaErrors says what); None where the rest cannot be judged."""
    data = copy.deepcopy(data)
    for err in errors:
        loc = tuple(err.loc)
        if err.type == "extra_forbidden":
            node: Any = data
            for part in loc[:-1]:   # the entry may be left out already
                node = node.get(part) if isinstance(node, dict) else (
                    node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else None)
            if isinstance(node, dict):
                node.pop(loc[-1], None)
        elif len(loc) >= 2 and loc[0] in _ENTRY_SECTIONS and isinstance(data.get(loc[0]), dict):
            data[loc[0]].pop(loc[1], None)
            removed.setdefault(loc[0], set()).add(str(loc[1]))
        elif loc and loc[0] == "rules":   # a refused switch: the rest is judged with no rule switched off
            data.pop("rules", None)
        else:
            return None
    return data


def _partial_stack(data: dict, errors: list) -> tuple[Stack | None, dict[str, set[str]]]:
    """The stack the rules can still judge beside the schema errors (SchemaErrors.partial), and what was left
    out; a few rounds, as leaving out a value can make its entry incomplete."""
    removed: dict[str, set[str]] = {}
    for _ in range(4):
        kept = _without_refused(data, errors, removed)
        if kept is None:
            return None, removed
        data = kept
        try:
            return Stack.model_validate(data), removed
        except ValidationError as exc:
            errors = exc.errors()
    return None, removed


@dataclass(frozen=True)
class LoadedStack:
    stack: Stack
    path: Path
    source: SourceMap

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def file(self) -> str:
        """The stack as the command line gave it (`stacks/train.yaml`): the file every diagnostic names, as the
        loader's and validate's do (the source map's). `path` is resolved, for reading what lies beside it."""
        return self.source.file

    @property
    def variables(self) -> dict:
        """name -> variables.Value: the value each declared variable had for this load."""
        return self.source.variables


def _owner_model(loc: tuple) -> type[Model] | None:
    """Walk an error location, skipping user-chosen map keys and list indices, to the owning model class."""
    model: type[Model] | None = Stack
    i = 0
    while i < len(loc):
        if model is None:
            return None
        field = model.model_fields.get(loc[i])
        if field is None:
            return model if i == len(loc) - 1 else None
        i += 2 if field.keyed else 1  # a map key or list index follows the field
        model = field.model
    return model


def _model_diagnostics(exc: ValidationError, source: SourceMap) -> list[Diagnostic]:
    out = []
    for err in exc.errors():
        loc, kind = err.loc, err.type
        where = ".".join(str(p) for p in loc) or "(top level)"
        if kind == "extra_forbidden":
            key = loc[-1]
            owner = _owner_model(loc)
            known = [f.key for f in owner.model_fields.values()] if owner else []  # as written in YAML ($schema)
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else (
                f"allowed here: {', '.join(known)}" if known else "remove it")
            out.append(source.diagnostic(loc, "stack.unknown-key", f"unknown key {key!r} in {'.'.join(map(str, loc[:-1])) or 'the stack'}",
                                         hint, key=True))
        elif kind == "missing":
            out.append(source.diagnostic(loc[:-1], "stack.missing-key", f"{where} is required",
                                         f"add `{loc[-1]}:` here", key=True))
        else:
            msg = err.msg
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            got = err.input
            secret = _is_secret_path(loc) or tuple(loc) in source.interpolated
            shown = "" if isinstance(got, (dict, list)) or got is None or secret else f" (got {short_repr(got)})"
            given = source.given_by(loc)   # a --var's value: the error names the --var, not only the stack's line
            shown = f"{shown[:-1]}, from {given[7:]}" if given and shown else given or shown
            hint = _type_hint(kind, loc)
            if kind == "literal_error" and isinstance(got, bool):   # `infiniband: yes` reads as true in YAML
                hint = f"{hint}; YAML reads yes/no/on/off/true/false as a boolean: write the word listed"
            out.append(source.diagnostic(loc, "stack.invalid", f"{where}: {msg}{shown}", hint))
    return out


def _is_secret_path(loc: tuple) -> bool:
    # Anything under ssh_settings may be a secret written in the wrong place (a password where a mapping goes).
    return any(p in ("ssh_settings", "admin_password", "ssh_key_value") for p in loc)


def _type_hint(kind: str, loc: tuple) -> str:
    if kind.startswith("int"):
        return "write a whole number"
    if kind.startswith("bool"):
        return "write true or false"
    if kind == "literal_error":
        return "use one of the values listed"
    if kind in ("dict_type", "model_type"):
        return "this must be a mapping of key: value lines"
    if kind == "list_type":
        return "this must be a list (- item lines or [a, b])"
    if kind == "control_characters":
        return ("remove them: names, paths, tags and variables are one line of plain text (a command or a "
                "description keeps its line breaks and tabs); Azure ML refuses NUL, ESC, U+0085, U+2028 and the like")
    if kind.startswith("string"):
        return "write text (quote it if YAML reads it as something else)"
    return says("fix the value here (see ", NextStep(("infra", "schema")), ")")


def _read_pasted_blocks(data: dict, source: SourceMap) -> dict:
    """A distribution's pasted `distribution:`/`resources:` blocks read into its flat fields, each moved value
    keeping its position (diagnostics about `type` point where it was written); a value given both ways with
    two meanings is an error at the nested line."""
    dists = data.get("distributions")
    if not isinstance(dists, dict):
        return data
    errors: list[Diagnostic] = []
    out = dict(dists)
    for name, raw in dists.items():
        if not isinstance(raw, dict):
            continue
        flat, moved, conflicts = flatten_distribution(raw)
        base = ("distributions", name)
        for block, key in moved:
            for table in (source.values, source.keys):
                if base + (block, key) in table:
                    table[base + (key,)] = table[base + (block, key)]
        for block, key in conflicts:
            errors.append(source.diagnostic(
                base + (block, key), "stack.conflict",
                f"distributions.{name}.{block}.{key} is {raw[block][key]!r} but {key} is {raw[key]!r}",
                f"give {key} once: keep the pasted `{block}:` block or the flat `{key}:`, not both"))
        out[name] = flat
    if errors:
        raise DiagnosticError(errors)
    return {**data, "distributions": out}


def parse_stack(text: str, file: str, environ: Mapping[str, str] | None = None,
                inputs: Inputs | None = None) -> tuple[Stack, SourceMap]:
    """`inputs`: the values given for the stack's variables (a run's --var / --var-file: Inputs(run.variables));
    none given: defaults and INFRA_VAR_<name> alone."""
    data, source = load_yaml(text, file, environ, inputs=Inputs() if inputs is None else inputs)
    if not isinstance(data, dict):
        raise DiagnosticError([Diagnostic("error", "stack.invalid", "a stack file must be a mapping at the top level",
                                          file, 1, 1, "start with `stack: NAME`")])
    data = _read_pasted_blocks(data, source)
    try:
        stack = Stack.model_validate(data)
    except ValidationError as exc:
        partial, removed = _partial_stack(data, exc.errors())
        error = SchemaErrors(_model_diagnostics(exc, source), removed=removed, source=source)
        if partial is not None:
            mark_sensitive_fields(partial, source.interpolated)
        error.partial_stack = partial   # load_stack makes it a LoadedStack
        raise error from None
    mark_sensitive_fields(stack, source.interpolated)
    return stack, source


def mark_sensitive_fields(stack: Stack, paths: set) -> None:
    """Each field that holds a sensitive value as plain text (a command, a curated reference, a workspace name from
    ${ENV}: fields whose text is parsed or becomes part of a URL) is marked, so that a dump of the stack (any writer
    of it) redacts it as it redacts a Secret (stack/fields.py Model.model_dump)."""
    for path in paths:
        node: Any = stack
        owner, name = None, None
        for step in path:
            if isinstance(node, Model):
                field = type(node)._by_key.get(step)
                if field is None:
                    break
                owner, name, node = node, field.name, node.__dict__.get(field.name)
            elif isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
                node = node[step]
            else:
                break
        if owner is not None and name is not None and not contains_secret(node):
            owner.mark_sensitive(name)


def load_stack(path: str | Path, environ: Mapping[str, str] | None = None,
               inputs: Inputs | None = None) -> LoadedStack:
    p = Path(path)
    text = read_stack_text(p)  # a regular file under a size cap (a FIFO would block the read)
    try:
        stack, source = parse_stack(text, str(path), environ, inputs)
    except SchemaErrors as exc:
        if exc.partial_stack is not None and exc.source is not None:
            exc.partial = LoadedStack(exc.partial_stack, p.resolve(), exc.source)
        raise
    return LoadedStack(stack, p.resolve(), source)
