"""YAML to plain data, remembering where every key and value came from (line, column; 1-based).

PyYAML's node tree carries marks; we walk it once, build the values ourselves (so duplicate keys and
`${VAR}` interpolation are reported at their exact position), and keep a path -> position map that
later stages use to point a diagnostic at the right place.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

from infra_cli.diagnostics import Diagnostic, DiagnosticError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# `$$` escapes a dollar; `${NAME}` interpolates; a `${` with no closing brace is an error.
_INTERPOLATION = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_MAX_NODES = 100_000
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Path = tuple  # a path into the document: keys (str) and list indices (int)


_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


@dataclass
class SourceMap:
    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    interpolated: set = field(default_factory=set)  # paths whose value came (partly) from ${VAR}

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

    def diagnostic(self, path: Path, rule: str, message: str, hint: str | None = None,
                   severity: str = "error", *, key: bool = False) -> Diagnostic:
        line, column = self.position(path, key=key)
        return Diagnostic(severity, rule, message, self.file, line, column, hint)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, file: str, text: str, environ: Mapping[str, str]):
        self.source = SourceMap(file)
        self.text = text
        self.environ = environ
        self.errors: list[Diagnostic] = []
        self._scalars = yaml.constructor.SafeConstructor()
        self._open: set[int] = set()  # ids of collection nodes being built: an alias back to one is a cycle
        self._built = 0

    def build(self, node: yaml.Node, path: Path) -> Any:
        self._built += 1
        if self._built > _MAX_NODES:  # aliases can expand a small file exponentially ("billion laughs")
            line, column = _mark(node)
            raise DiagnosticError([Diagnostic("error", "stack.syntax", f"the document expands to more than {_MAX_NODES} values",
                                              self.source.file, line, column, "use fewer YAML aliases (*name)")])
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
        if isinstance(value, str) and "$" in value:
            interpolated = self._interpolate(value, node)
            if interpolated != value.replace("$$", "$"):
                self.source.interpolated.add(path)
            value = interpolated
        return value

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
            self._error(node, "stack.syntax", f"{node.value!r} is not a valid {what}: {exc}",
                        f"write a valid {what}, or quote the value to make it text")
            return None

    def _interpolate(self, text: str, node: yaml.Node) -> str:
        places = self._reference_positions(node)
        seen = 0

        def replace(m: re.Match) -> str:
            nonlocal seen
            if m.group(0) == "$$":
                return "$"
            at = places[seen] if seen < len(places) else _mark(node)
            seen += 1
            name = m.group(1)
            if name is None:
                self._error_at(at, "stack.interpolation", "`${` has no closing `}`",
                               "write ${NAME}; $$ escapes a dollar sign")
                return m.group(0)
            if not _ENV_NAME.match(name):
                self._error_at(at, "stack.interpolation", f"${{{name}}} is not a valid variable reference",
                               "write ${NAME} with letters, digits and underscores; $$ escapes a dollar sign")
                return m.group(0)
            if name not in self.environ:
                self._error_at(at, "stack.interpolation", f"environment variable {name} is not set",
                               f"export {name}=... before running, or write $${{{name}}} for a literal")
                return m.group(0)
            return self.environ[name]

        return _INTERPOLATION.sub(replace, text)

    def _reference_positions(self, node: yaml.Node) -> list[tuple[int, int]]:
        """Line and column of each `${` in the scalar's source text, so errors point at the reference itself."""
        start, end = node.start_mark, node.end_mark
        raw = self.text[start.index:end.index]
        out = []
        for m in _INTERPOLATION.finditer(raw):
            if m.group(0) == "$$":
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


def load_yaml(text: str, file: str, environ: Mapping[str, str] | None = None) -> tuple[Any, SourceMap]:
    """Parse one YAML document; raise DiagnosticError on syntax errors, duplicates, bad interpolation."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise DiagnosticError([Diagnostic("error", "stack.syntax", f"YAML syntax error: {problem}", file,
                                          line, column, "check indentation, colons and quoting here")])
    except yaml.YAMLError as exc:
        raise DiagnosticError([Diagnostic("error", "stack.syntax", f"YAML error: {exc}", file, 1, 1,
                                          "the file must be one YAML document")])
    if node is None:
        raise DiagnosticError([Diagnostic("error", "stack.empty", "the stack file is empty", file, 1, 1,
                                          "start with `stack: NAME` and a `workspace:` section")])
    builder = _Builder(file, text, os.environ if environ is None else environ)
    data = builder.build(node, ())
    if builder.errors:
        raise DiagnosticError(builder.errors)
    return data, builder.source
