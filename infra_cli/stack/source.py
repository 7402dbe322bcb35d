"""YAML to plain data, remembering where every key and value came from (line, column; 1-based). The file's text
and its syntax are read under stack/bounded_yaml.py's bounds first.

PyYAML's node tree carries marks; we walk it once, build the values ourselves (so duplicate keys and
`${VAR}` interpolation are reported at their exact position), and keep a path -> position map that
later stages use to point a diagnostic at the right place.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError, Severity, says
from infra_cli.stack import secret as secret_text, variables
from infra_cli.stack.bounded_yaml import MAX_STACK_BYTES, compose, read_stack_text

# `$$` escapes a dollar; `${NAME}` interpolates; a `${` with no closing brace is an error. Azure ML's own
# expressions (`${{inputs.epochs}}`, `${{outputs.model}}`) pass through untouched, so a pasted command keeps them.
_AZUREML_EXPRESSION = "${{"
_INTERPOLATION = re.compile(r"\$\$|\$\{\{[^{}]*\}\}|\$\{([^}]*)\}|\$\{")
_MAX_NODES = 100_000
# Bounds on hostile input beside stack/bounded_yaml.py's (the file read, the nesting): the text that aliases
# may expand to (each *alias repeats its anchor's text, so a small file can otherwise print a gigabyte).
MAX_EXPANDED_BYTES = 4 << 20
SCRUBBED_FROM = 4   # the shortest secret text SourceMap.scrubbed takes out of a diagnostic
_WHOLE_VARIABLE = re.compile(r"\$\{var\.([^{}]*)\}")
_RESOURCE_REFERENCE = re.compile(r"^(?:cluster|environment|smoke)\.")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Path = tuple  # a path into the document: keys (str) and list indices (int)


_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


def short_repr(value: Any) -> str:
    """A value as echoed in a diagnostic: its repr, cut to a line (a hostile stack can hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


@dataclass
class SourceMap:
    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    interpolated: set = field(default_factory=set)  # paths whose value came (partly) from ${VAR}
    written: dict = field(default_factory=dict)  # interpolated path -> the text the stack wrote (e.g. "${TOKEN}")
    variables: dict = field(default_factory=dict)  # name -> variables.Value, the `${var.NAME}` values the load used
    warnings: list = field(default_factory=list)  # what the load warns of (an undeclared key in a var file)
    secrets: set = field(default_factory=set)  # the clear texts of the stack's secrets: never in a diagnostic
    unknown: dict = field(default_factory=dict)  # path -> the unset variables its value is built from (unknown)
    given: dict = field(default_factory=dict)  # path -> (variable, where its value came from) for a whole ${var.X}

    def unknown_positions(self) -> set[tuple[int | None, int | None]]:
        """Where the stack holds an unknown value: a rule's error there judges the placeholder, not the stack."""
        return {self.position(p) for p in self.unknown}

    def given_by(self, path: Path) -> str:
        """" (from --var nodes)" where the value at `path` is a whole ${var.X} given outside the stack (--var,
        INFRA_VAR_X, a var file): an error there names where to fix it; "" otherwise."""
        name, origin = self.given.get(tuple(path), (None, None))
        return f" (from {origin})" if name is not None and origin != "default" else ""

    def position(self, path: Path, *, key: bool = False) -> tuple[int | None, int | None]:
        """The position of `path`, or of its nearest ancestor that has one."""
        table = self.keys if key else self.values
        p = tuple(path)
        while p:
            if p in table:
                return table[p]
            if p in self.values:
                return self.values[p]
            p = p[:-1]
        return self.values.get((), (1, 1))

    def sensitive(self, mapping: Path) -> dict[str, str]:
        """Keys of the mapping at `mapping` whose values came from ${VAR}, with the text the stack wrote.
        Interpolated values are sensitive (as Terraform's `sensitive`): never shown or written out."""
        n = len(mapping)
        return {p[n]: self.written.get(p, "") for p in self.interpolated
                if len(p) == n + 1 and tuple(p[:n]) == tuple(mapping) and isinstance(p[n], str)}

    def diagnostic(self, path: Path, rule: str, message: str, hint: str | None = None,
                   severity: Severity = "error", *, key: bool = False) -> Diagnostic:
        """A diagnostic at `path`, with every secret of the stack that its text quotes (a registry named by a
        sensitive variable inside a reference, say) as "(sensitive value)"."""
        line, column = self.position(path, key=key)
        return Diagnostic(severity, rule, self.scrubbed(message), self.file, line, column,
                          hint if hint is None else self.scrubbed(hint))

    def scrubbed(self, text: str) -> str:
        """`text` without the stack's secrets. One of fewer than SCRUBBED_FROM characters (a flag's "1", a count)
        is left: replacing it would garble every message, and it tells nothing a guess would not."""
        for clear in sorted(self.secrets, key=len, reverse=True):
            if len(clear) >= SCRUBBED_FROM and clear in text:
                text = text.replace(clear, secret_text.SHOWN)
        return text


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, file: str, text: str, environ: Mapping[str, str] | None, *, interpolate: bool = True):
        self.source = SourceMap(file)
        self.text = text
        self.environ = environ   # None: `$` is plain text (a file a stack names, not the stack)
        self.interpolate = interpolate and environ is not None
        self.variables: dict | None = None  # name -> variables.Value once `variables:` is resolved
        self.prebuilt: dict = {}  # path -> value built ahead (the `variables:` block)
        self.errors: list[Diagnostic] = []
        self._scalars = yaml.constructor.SafeConstructor()
        self._open: set[int] = set()  # ids of collection nodes being built: an alias back to one is a cycle
        self._built = 0
        self._bytes = 0  # text built so far, counting every alias expansion

    def build(self, node: yaml.Node, path: Path) -> Any:
        if path in self.prebuilt:
            return self.prebuilt[path]
        self._built += 1
        if self._built > _MAX_NODES:  # aliases can expand a small file exponentially ("billion laughs")
            line, column = _mark(node)
            raise DiagnosticError([Diagnostic("error", "stack.syntax", f"the document expands to more than {_MAX_NODES} values",
                                              self.source.file, line, column, "use fewer YAML aliases (*name)")])
        if isinstance(node, yaml.ScalarNode):
            self._count_bytes(node)
        self.source.values[path] = _mark(node)
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if id(node) in self._open:
                self._error(node, "stack.syntax", "a YAML alias refers to a collection that contains it",
                            "remove the recursive alias (*name inside the &name it points to)")
                return None
            self._open.add(id(node))
            try:
                return self._build_collection(node, path)
            finally:
                self._open.discard(id(node))
        value = self._scalar(node)
        if isinstance(value, str) and "$" in value and self.interpolate:
            whole = _WHOLE_VARIABLE.fullmatch(value)
            if whole is not None:
                found = self._variable(whole.group(1), _mark(node))
                if found is None:
                    return None
                if found.origin == variables.UNKNOWN_ORIGIN:
                    self.source.unknown[path] = {whole.group(1)}
                    if found.sensitive:   # a placeholder: no secret text to keep out of messages
                        self.source.interpolated.add(path)
                        self.source.written[path] = value
                        return secret_text.wrap(found.value)
                    return copy.deepcopy(found.value)
                self.source.given[path] = (whole.group(1), found.origin)
                if found.sensitive:
                    self.source.interpolated.add(path)
                    self.source.written[path] = value
                    self._remember(found.value)
                    return secret_text.wrap(found.value)   # text, and every text of a list or map, a Secret
                return copy.deepcopy(found.value)
            secret = [False]
            interpolated = self._interpolate(value, node, secret, outputs=path[:1] == ("outputs",), path=path)
            if secret[0]:   # text built from a secret is a secret
                self.source.interpolated.add(path)
                self.source.written[path] = value
                self.source.secrets.add(interpolated)
                return secret_text.Secret(interpolated)
            value = interpolated
        return value

    def _variable(self, name: str, at: tuple[int, int]) -> Any:
        """The resolved `var.NAME`, or None after an error at `at`."""
        if self.variables is None:
            self._error_at(at, "stack.interpolation", f"${{var.{name}}} cannot be used here",
                           "variables are for the stack's other sections, not for `variables:` itself")
            return None
        found = self.variables.get(name)
        if found is None:
            close = difflib.get_close_matches(name, list(self.variables), n=1, cutoff=0.6)
            self._error_at(at, "variable.undeclared", f"${{var.{name}}}: no variable {name!r} is declared",
                           f"did you mean var.{close[0]}?" if close else
                           f"declare it under `variables:` (`{name}: {{type: string}}`)")
            return None
        return found

    def _remember(self, value: Any) -> None:
        """The texts of a sensitive value given whole (a list's or map's too), to keep out of diagnostics."""
        pending = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, dict):
                pending.extend(item.values())
            elif isinstance(item, list):
                pending.extend(item)
            elif item is not None and not isinstance(item, bool):
                self.source.secrets.add(str(item))

    def _count_bytes(self, node: yaml.ScalarNode) -> None:
        self._bytes += len(node.value) + 1
        if self._bytes > MAX_EXPANDED_BYTES:
            line, column = _mark(node)
            raise DiagnosticError([Diagnostic(
                "error", "stack.too-large", f"the document expands to more than {MAX_EXPANDED_BYTES >> 20} MiB of text",
                self.source.file, line, column, "use fewer YAML aliases (*name) to large values")])

    def _build_collection(self, node: yaml.Node, path: Path) -> Any:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    self._error(key_node, "stack.syntax", "a mapping key must be a plain scalar",
                                "write keys as simple names")
                    continue
                if key_node.tag == "tag:yaml.org,2002:merge":
                    self._error(key_node, "stack.syntax", "YAML merge keys (<<) are not supported",
                                "repeat the fields instead of merging")
                    continue
                self._count_bytes(key_node)
                key = self._scalar(key_node)
                key = str(key) if not isinstance(key, str) else key
                if key in out:
                    first = self.source.keys[path + (key,)]
                    self._error(key_node, "stack.duplicate-key",
                                f"duplicate key {key!r} (first defined at line {first[0]})",
                                "remove one of the two definitions")
                    continue
                self.source.keys[path + (key,)] = _mark(key_node)
                out[key] = self.build(value_node, path + (key,))
            return out
        return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        """A scalar of YAML's core schema. Dates stay the text written (a version like 2024-01-02 is text);
        other explicit tags (!!binary, !!python/..., !custom) are refused, as is a value its tag cannot read."""
        if node.tag == _TIMESTAMP_TAG:
            return node.value
        if node.tag not in _CORE_TAGS:
            self._error(node, "stack.syntax", f"unsupported YAML tag {node.tag!r}",
                        "remove the tag: stacks use plain strings, numbers, booleans and null")
            return None
        try:
            return self._scalars.construct_object(node)
        except (ValueError, TypeError, ArithmeticError, yaml.YAMLError) as exc:
            what = node.tag.rsplit(":", 1)[-1]
            self._error(node, "stack.syntax", f"{short_repr(node.value)} is not a valid {what}: {exc}",
                        f"write a valid {what}, or quote the value to make it text")
            return None

    def _interpolate(self, text: str, node: yaml.Node, secret: list, outputs: bool = False, path: Path = ()) -> str:
        places = self._reference_positions(node)
        seen = 0

        def replace(m: re.Match) -> str:
            nonlocal seen
            if m.group(0) == "$$":
                return "$"
            if m.group(0).startswith(_AZUREML_EXPRESSION):
                return m.group(0)
            at = places[seen] if seen < len(places) else _mark(node)
            seen += 1
            name = m.group(1)
            if name is not None and outputs and _RESOURCE_REFERENCE.match(name):
                return m.group(0)  # an output's reference to a resource attribute, read live (stack/outputs.py)
            if name is not None and name.startswith("var."):
                found = self._variable(name[4:], at)
                if found is None:
                    return m.group(0)
                if found.origin == variables.UNKNOWN_ORIGIN:   # text built from an unknown value is unknown
                    self.source.unknown.setdefault(path, set()).add(name[4:])
                    return "unknown"
                shown = variables.as_text(found.value)
                if shown is None:
                    self._error_at(at, "variable.type", f"${{{name}}} is a {variables.type_name(found.value)}: it "
                                   "cannot stand inside text", f"write the value as exactly \"${{{name}}}\", alone")
                    return m.group(0)
                if found.sensitive:
                    secret[0] = True
                    self.source.secrets.add(shown)
                return shown
            if name is None:
                self._error_at(at, "stack.interpolation", "`${` has no closing `}`",
                               "write ${NAME}; $$ escapes a dollar sign")
                return m.group(0)
            if not _ENV_NAME.match(name):
                binding = name.strip().split(".", 1)[0] in ("inputs", "outputs")
                self._error_at(at, "stack.interpolation", f"${{{name}}} is not a valid variable reference",
                               f"a job binding is ${{{{{name.strip()}}}}}, with two pairs of braces (Azure ML binds "
                               "only that form); $$ escapes a dollar sign" if binding else
                               "write ${NAME} with letters, digits and underscores; $$ escapes a dollar sign")
                return m.group(0)
            if self.environ is None or name not in self.environ:   # None: interpolation is off, never here
                self._error_at(at, "stack.interpolation", f"environment variable {name} is not set",
                               f"export {name}=... before running, or write $${{{name}}} for a literal")
                return m.group(0)
            secret[0] = True
            self.source.secrets.add(self.environ[name])
            return self.environ[name]

        return _INTERPOLATION.sub(replace, text)

    def _reference_positions(self, node: yaml.Node) -> list[tuple[int, int]]:
        """Line and column of each `${` in the scalar's source text, so errors point at the reference itself."""
        start, end = node.start_mark, node.end_mark
        raw = self.text[start.index:end.index]
        out = []
        for m in _INTERPOLATION.finditer(raw):
            if m.group(0) == "$$" or m.group(0).startswith(_AZUREML_EXPRESSION):
                continue
            before = raw[:m.start()]
            newlines = before.count("\n")
            column = (start.column + len(before) if newlines == 0 else len(before) - before.rfind("\n") - 1)
            out.append((start.line + 1 + newlines, column + 1))
        return out

    def _error(self, node: yaml.Node, rule: str, message: str, hint: str) -> None:
        self._error_at(_mark(node), rule, message, hint)

    def _error_at(self, at: tuple[int, int], rule: str, message: str, hint: str) -> None:
        self.errors.append(Diagnostic("error", rule, message, self.source.file, at[0], at[1], hint))


def load_yaml(text: str, file: str, environ: Mapping[str, str] | None = None, *, interpolate: bool = True,
              inputs: "variables.Inputs | None" = None) -> tuple[Any, SourceMap]:
    """Parse one YAML document; raise DiagnosticError on syntax errors, duplicates, bad interpolation.
    `interpolate`: replace `${NAME}` (environment) and `${var.NAME}`; `inputs`: the values given for the
    document's `variables:` (a stack's), resolved before anything else is built. `interpolate=False` reads another
    YAML file under the same bounds (depth, values, expanded text), its `${` as written: a conda file a stack names."""
    node = compose(text, file)
    if node is None:
        raise DiagnosticError([Diagnostic("error", "stack.empty", "the stack file is empty", file, 1, 1,
                                          "start with `stack: NAME` and a `workspace:` section")])
    environ = os.environ if environ is None else environ
    builder = _Builder(file, text, environ if interpolate else None, interpolate=interpolate)
    if inputs is not None and interpolate:
        declared = _top_level(node, "variables")
        decls = builder.build(declared, ("variables",)) if declared is not None else {}
        if builder.errors:
            raise DiagnosticError(builder.errors)
        resolved = variables.resolve(decls, builder.source, environ, inputs, _read_var_file, bounded_value)
        if resolved.errors:
            raise DiagnosticError(resolved.errors)
        builder.variables = resolved.values
        builder.source.variables, builder.source.warnings = resolved.values, resolved.warnings
        builder.prebuilt[("variables",)] = decls
    data = builder.build(node, ())
    if builder.errors:
        raise DiagnosticError(builder.errors)
    if inputs is not None and inputs.needed:
        missing = needed_unknown(builder.source, inputs.needed, inputs.command or "this command")
        if missing:
            raise DiagnosticError(missing)
    return data, builder.source


def needed_unknown(source: SourceMap, needed: Sequence[tuple[str, ...] | str], what: str) -> list[Diagnostic]:
    """A command that reads some of the stack (`needed`: its paths, variables.needs_path) needs a variable only
    where one of those is built from it: variable.missing for each such unset variable, at its declaration,
    naming `what` needs it and the values built from it."""
    needs: dict[str, list[str]] = {}
    for path, names in source.unknown.items():
        if variables.needs_path(needed, path):
            for name in names:
                needs.setdefault(name, []).append(".".join(str(p) for p in path))
    return [source.diagnostic(
        ("variables", name), "variable.missing", says(f"variable {name!r} has no value, and ", what, " needs it: "
                                                      f"{', '.join(sorted(paths))} {'is' if len(paths) == 1 else 'are'} "
                                                      "built from it"),
        variables.ways_to_set(name, _sensitive(source, name)), key=True) for name, paths in sorted(needs.items())]


def _sensitive(source: SourceMap, name: str) -> bool:
    value = source.variables.get(name)
    return value is not None and value.sensitive


def declared_not_sensitive(path: str | os.PathLike, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The variables a stack file declares non-sensitive (variables.declared_not_sensitive), read as the loader
    reads its `variables:` block (bounded, `${NAME}` from the environment); none when the file or that block
    cannot be read: a view then names every --var of the run without its value."""
    try:
        text = read_stack_text(path)
        node = compose(text, str(path))
        declared = _top_level(node, "variables") if node is not None else None
        if declared is None:
            return frozenset()
        builder = _Builder(str(path), text, os.environ if environ is None else environ, interpolate=True)
        decls = builder.build(declared, ("variables",))
        if builder.errors:
            return frozenset()
        return variables.declared_not_sensitive(decls, builder.source)
    except (DiagnosticError, yaml.YAMLError, OSError, ValueError, RecursionError):
        return frozenset()


def declared_names(path: str | os.PathLike) -> frozenset[str] | None:
    """The variable names a stack file declares (the keys of its `variables:`), read bounded and without building
    a value; None when the file is not a readable stack (no top-level `stack:`)."""
    try:
        node = compose(read_stack_text(path), str(path))
    except (DiagnosticError, yaml.YAMLError, OSError, ValueError, RecursionError):
        return None
    if node is None or _top_level(node, "stack") is None:
        return None
    declared = _top_level(node, "variables")
    if not isinstance(declared, yaml.MappingNode):
        return frozenset()
    return frozenset(str(k.value) for k, _ in declared.value if isinstance(k, yaml.ScalarNode))


def bounded_value(text: str) -> Any:
    """A list or map given as text (`--var NAME=VALUE`, INFRA_VAR_NAME), read as a stack file is: at most
    MAX_STACK_BYTES, MAX_DEPTH levels, _MAX_NODES values and MAX_EXPANDED_BYTES of text once aliases expand.
    Raises DiagnosticError over a bound; yaml.YAMLError (or DiagnosticError stack.syntax) when it does not parse."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_STACK_BYTES:
        raise DiagnosticError([Diagnostic("error", "stack.too-large", f"is larger than {MAX_STACK_BYTES >> 20} MiB",
                                          None, None, None, None)])
    try:
        return load_yaml(text, "value", {}, interpolate=False)[0]
    except DiagnosticError as exc:
        first = exc.diagnostics[0] if exc.diagnostics else None
        if first is not None and first.rule == "stack.syntax" and "expands to more than" in first.message:
            raise DiagnosticError([dataclasses.replace(first, rule="stack.too-many-values")]) from None
        if first is not None and first.rule == "stack.empty":
            return None
        raise


def _read_var_file(path: str) -> tuple[Any, SourceMap]:
    """A --var-file: YAML or JSON, read as a stack file is (bounded), with no interpolation."""
    return load_yaml(read_stack_text(path), path, {}, interpolate=False)


def _top_level(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
    return None
