"""Input variables, as Terraform's: `variables:` declarations, the values given for them, and the order in
which those values win (https://developer.hashicorp.com/terraform/language/values/variables#variable-definition-precedence):
a declaration's `default`, then `INFRA_VAR_<name>` in the environment, then each `--var-file FILE` and
`--var NAME=VALUE` in the order they stand on the command line (the last one wins).

The stack's `${var.NAME}` references are replaced while it loads (stack/source.py), so everything after the
loader sees a plain stack. A value that is exactly one `${var.NAME}` keeps the variable's type. A `sensitive`
variable's value, and a variable whose default is built from a `${NAME}` environment value, is a secret
(stack/secret.py `Secret`, as `${NAME}` values are): never shown, never echoed in an error or a hint, and a saved
plan keeps only its keyed digest (plan/planfile.py secret_seal: HMAC under INFRA_PLAN_KEY, else scrypt). A list or
map given as text (`--var`, INFRA_VAR_) is read under the stack loader's bounds (source.py bounded_value).
"""

from __future__ import annotations

import dataclasses
import difflib
import hmac
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping, Sequence

import yaml

from infra_cli.arguments import NextStep, VarInput
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
from infra_cli.stack.secret import SHOWN as SENSITIVE_SHOWN, Secret, contains_secret, revealed

ENV_PREFIX = "INFRA_VAR_"
TYPES = ("string", "number", "bool", "list", "map")
KEYS = ("type", "default", "allowed", "description", "sensitive")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Inputs:
    """Where the values come from beyond defaults and the environment: the command line, in its order, or a saved
    plan's recorded values ({name: {"value": V} | {"sensitive": true, "digest": D}}), which take no other."""

    command_line: tuple[VarInput, ...] = ()
    recorded: Mapping[str, Any] | None = None
    plan_file: str | None = None
    seal: Callable[[Any], str] | None = None   # how the plan keeps a secret (plan/planfile.py secret_seal)
    # an unset variable is unknown (UNKNOWN_ORIGIN), not an error: offline `validate` (with a warning) and the
    # commands that read (output, state list, show) or write only the state (state rm, import, force-unlock),
    # which need only what `needed` names (stack paths: ("stack",), ("workspace",), ("clusters", "a100"); "*"
    # stands for any key, a plain string for a top-level section) and refuse with variable.missing where one of
    # those is built from an unset variable
    unset_unknown: bool = False
    needed: tuple[tuple[str, ...] | str, ...] = ()
    command: str = ""   # the command that needs them, as a message names it ("infra output")


def needs_path(needed: Sequence[tuple[str, ...] | str], path: Sequence[Any]) -> bool:
    """Whether the stack value at `path` is one `needed` names: under one of its paths, or holding one."""
    for one in needed:   # under a needed path, or holding one (`clusters: ${var.all}` holds clusters.a100)
        if path and all(p == "*" or p == str(k) for p, k in zip((one,) if isinstance(one, str) else one, path)):
            return True
    return False


def needing(inputs: Inputs | None, *paths: tuple[str, ...]) -> Inputs | None:
    """`inputs` needing `paths` too, where it needs only some of the stack (a command reading the state); inputs
    that need every variable (plan, apply) are returned as they are."""
    if inputs is None or not inputs.needed:
        return inputs
    return dataclasses.replace(inputs, needed=inputs.needed + paths)


UNKNOWN_ORIGIN = "unset"   # a Value with this origin is unknown: a placeholder, judged by no rule
_PLACEHOLDERS = {"number": 1, "bool": False, "list": [], "map": {}}


def placeholder(kind: str | None) -> Any:
    """What an unknown value of type `kind` stands as, so the schema reads the stack (its positions are then
    skipped by the rules: SourceMap.unknown)."""
    return _PLACEHOLDERS.get(kind or "string", "unknown")


@dataclass(frozen=True)
class Value:
    value: Any
    sensitive: bool
    origin: str  # "default", "INFRA_VAR_env", "--var env=prod", "prod.yaml:3:7", "the saved plan"


@dataclass
class Resolved:
    values: dict[str, Value] = field(default_factory=dict)
    warnings: list[Diagnostic] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)


def command_line_words(given: Sequence[VarInput], not_sensitive: Collection[str]) -> list[str]:
    """A run's --var / --var-file options (`given`), for a command a message names on the same stack: without
    them it would read another workspace (`resource_group: rg-${var.env}`). A --var of a variable not in
    `not_sensitive` (the stack's variables declared non-sensitive: declared_not_sensitive) is left out, never
    echoed: that command then says the variable has no value."""
    words: list[str] = []
    for one in given:
        if one.kind == "var" and one.text.partition("=")[0].strip() not in not_sensitive:
            continue
        words += [f"--{one.kind}", one.text]
    return words


def left_out_of_command_line(given: Sequence[VarInput], not_sensitive: Collection[str]) -> list[str]:
    """The variables `given` with --var that command_line_words leaves out (sensitive, or not known to be
    declared otherwise): a hint names them, never their values."""
    return sorted({one.text.partition("=")[0].strip() for one in given
                   if one.kind == "var" and one.text.partition("=")[0].strip() not in not_sensitive})


def declared_not_sensitive(decls: Any, source: Any) -> frozenset[str]:
    """The names of a stack's `variables:` declarations (built by the loader) that are not sensitive: neither
    `sensitive: true` nor with a default built from a `${NAME}` environment value. Only the declarations are
    read, never a value given for them."""
    if not isinstance(decls, dict):
        return frozenset()
    declaring = _Resolver(decls, source, {}, Inputs(), lambda path: (None, None))
    for name, decl in decls.items():
        declaring.declare(name, decl)
    return frozenset(name for name, sensitive in declaring.sensitive.items() if not sensitive)


def command_words(recorded: Mapping[str, Any]) -> list[str]:
    """A saved plan's recorded values (recorded_values) as the --var options that give them again, each
    `NAME=VALUE` as a -var value reads back (a list or map as JSON); a sensitive one (kept as a digest) is left
    out: it comes again from INFRA_VAR_<name> or its default, as when the plan was made."""
    words: list[str] = []
    for name, entry in sorted(recorded.items()):
        if isinstance(entry, dict) and "value" in entry and not entry.get("sensitive"):
            value = entry["value"]
            text = as_text(value) if as_text(value) is not None else json.dumps(value, sort_keys=True)
            words += ["--var", f"{name}={text}"]
    return words


def recorded_values(values: Mapping[str, Value]) -> dict[str, Any]:
    """What a saved plan keeps of the values it was made with: each value, a sensitive one as a Secret, which the
    plan file writes as its keyed digest (plan/planfile.py secret_seal: HMAC or scrypt, never a fast hash)."""
    out: dict[str, Any] = {}
    for name, v in sorted(values.items()):
        if v.sensitive:
            out[name] = {"sensitive": True, "digest": Secret(_digest_text(v.value))}
        else:
            out[name] = {"value": v.value}
    return out


def short_text(text: str) -> str:
    """A value as an error quotes it: cut to a line (a value given on the command line can be megabytes)."""
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _digest_text(value: Any) -> str:
    """A value as its digest is taken of (a list or map as canonical JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def type_name(value: Any) -> str:
    """Terraform's name of a value's type, as `infra output --json` reports it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return "string"


def convert(value: Any, kind: str | None, *, text: bool, parse: Callable[[str], Any] | None = None
            ) -> tuple[bool, Any]:
    """`value` as a value of type `kind` (None: any). `text`: it came as text (--var, the environment), read as
    Terraform reads a -var value; otherwise a typed YAML/JSON value (a default, a var file). `parse`: how a list or
    map given as text is read (the loader's, under its bounds: source.py bounded_value), which raises
    DiagnosticError for a value over a bound."""
    if text and isinstance(value, str):
        if kind in (None, "string"):
            return True, value
        if kind == "number":
            if _INTEGER.fullmatch(value):
                return True, int(value)
            if _DECIMAL.fullmatch(value) and math.isfinite(float(value)):   # "1e400" is no number a field takes
                return True, float(value)
            return False, None
        if kind == "bool":
            return (True, value == "true") if value in ("true", "false") else (False, None)
        try:
            parsed = (parse or _unbounded)(value)
        except yaml.YAMLError:
            return False, None
        except DiagnosticError as exc:
            if exc.diagnostics and exc.diagnostics[0].rule in OVER_A_BOUND:
                raise
            return False, None
        return convert(parsed, kind, text=False)
    if kind is None:
        return True, value
    if kind == "string":
        if isinstance(value, str):
            return True, value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, str(value)
        return False, None
    if kind == "number":
        return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value), value)
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "list":
        return isinstance(value, list), value
    return isinstance(value, dict), value


# what the loader says of a document over its bounds (stack/source.py): a --var value over one is said as such
OVER_A_BOUND = ("stack.too-deep", "stack.too-large", "stack.too-many-values")


def _unbounded(text: str) -> Any:
    raise DiagnosticError([Diagnostic("error", "stack.too-large", "a list or map value needs the stack loader's "
                                      "bounded reader", None, None, None, None)])


def as_text(value: Any) -> str | None:
    """A value as it reads inside a longer string; None for a list or map (they stand only as whole values)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return None
    return str(value)


def ways_to_set(name: str, sensitive: bool = False) -> str:
    if sensitive:   # a secret: the environment only, as the README and variable.plan-sensitive say (and the Action
        # can set nothing else); a var file or default would be committed, a --var kept in the shell's history
        return (f"it is sensitive: set the environment variable {ENV_PREFIX}{name} (in CI from a secret, e.g. a "
                f"GitHub Actions step's `env:`), never in a var file or the stack file")
    return (f"set it with `--var {name}=VALUE`, in a `--var-file FILE` (a line `{name}: VALUE`), or as the "
            f"environment variable {ENV_PREFIX}{name}; or give it a `default:`")


class _Resolver:
    def __init__(self, decls: Any, source: Any, environ: Mapping[str, str], inputs: Inputs, read_file: Callable,
                 parse: Callable[[str], Any] | None = None):
        self.decls, self.source, self.environ, self.inputs = decls, source, environ, inputs
        self.read_file, self.parse = read_file, parse
        self.out = Resolved()
        self.types: dict[str, str | None] = {}
        self.allowed: dict[str, list | None] = {}
        self.sensitive: dict[str, bool] = {}

    def error(self, path: tuple, rule: str, message: str, hint: str, *, key: bool = False) -> None:
        self.out.errors.append(self.source.diagnostic(path, rule, message, hint, key=key))

    def resolve(self) -> Resolved:
        if self.decls is None:
            self.decls = {}
        if not isinstance(self.decls, dict):
            self.error(("variables",), "stack.invalid", "variables must be a mapping of NAME: {type, default, ...}",
                       "write `variables:` then one `NAME: {type: string, default: VALUE}` line per variable")
            return self.out
        for name, decl in self.decls.items():
            self.declare(name, decl)
        if self.out.errors:
            return self.out
        chosen: dict[str, Value] = {}
        for name in self.types:
            decl = self.decls[name] or {}
            if "default" in decl and decl["default"] is not None:
                chosen[name] = Value(self._converted_default(name, decl["default"]), self.sensitive[name], "default")
        if self.inputs.recorded is not None:
            self.from_plan(chosen)
        else:
            self.from_environment(chosen)
            for given in self.inputs.command_line:
                (self.from_file if given.kind == "var-file" else self.from_flag)(given.text, chosen)
        for name in self.types:
            if name not in chosen and not self.out.errors and self.inputs.unset_unknown:
                chosen[name] = Value(placeholder(self.types[name]), self.sensitive[name], UNKNOWN_ORIGIN)
                if not self.inputs.needed:   # validate: said once; a read-only command says it only if it needs it
                    self.out.warnings.append(self.source.diagnostic(
                        ("variables", name), "variable.unknown", f"variable {name!r} has no value here: judged as "
                        "unknown (plan and apply need it)", ways_to_set(name, self.sensitive[name]), "warning", key=True))
            elif name not in chosen and not self.out.errors:
                self.error(("variables", name), "variable.missing", f"variable {name!r} has no value",
                           ways_to_set(name, self.sensitive[name]), key=True)
        self.out.values = chosen
        return self.out

    def declare(self, name: str, decl: Any) -> None:
        path = ("variables", name)
        if not NAME.match(str(name)):
            self.error(path, "stack.invalid", f"{name!r} is not a valid variable name",
                       "use letters, digits, _ and -, starting with a letter or _", key=True)
            return
        if decl is None:
            decl = self.decls[name] = {}
        if not isinstance(decl, dict):
            self.error(path, "stack.invalid", f"variables.{name} must be a mapping",
                       "write `NAME: {type: string, default: VALUE}` (or `NAME: {}`)")
            return
        for key in decl:
            if key not in KEYS:
                close = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.6)
                self.error(path + (key,), "stack.unknown-key", f"unknown key {key!r} in variables.{name}",
                           f"did you mean {close[0]!r}?" if close else f"allowed here: {', '.join(KEYS)}", key=True)
        kind = decl.get("type")
        if kind is not None and kind not in TYPES:
            self.error(path + ("type",), "stack.invalid", f"variables.{name}.type is {kind!r}",
                       f"use one of {', '.join(TYPES)}")
            return
        sensitive = decl.get("sensitive", False)
        if not isinstance(sensitive, bool):
            self.error(path + ("sensitive",), "stack.invalid", f"variables.{name}.sensitive must be true or false",
                       "write true or false")
            return
        if sensitive and decl.get("default") not in (None, "") and not contains_secret(decl["default"]):
            # the secret itself in the stack file, which goes to git (tfsec and checkov flag the same in Terraform)
            self.out.warnings.append(self.source.diagnostic(
                path + ("default",), "variable.sensitive-default", f"sensitive variable {name!r} has its value "
                "written in the stack file (`default:`), which is committed with it", f"remove the `default:`; "
                f"{ways_to_set(name, True)}", "warning"))
        if contains_secret(decl.get("default")):   # a default built from ${ENV}: the variable's value is a secret
            decl["default"], sensitive = revealed(decl["default"]), True
        allowed = decl.get("allowed")
        if allowed is not None:
            if not isinstance(allowed, list) or not allowed:
                self.error(path + ("allowed",), "stack.invalid", f"variables.{name}.allowed must be a list of values",
                           "write allowed: [a, b]")
                return
            converted = []
            for i, v in enumerate(allowed):
                ok, c = convert(v, kind, text=False)
                if not ok:
                    self.error(path + ("allowed", i), "variable.type", f"variables.{name}.allowed[{i}] is not a {kind}",
                               f"write a {kind} value")
                converted.append(c)
            allowed = converted
        description = decl.get("description")
        if description is not None and not isinstance(description, str):
            self.error(path + ("description",), "stack.invalid", f"variables.{name}.description must be text",
                       "write text (quote it if YAML reads it as something else)")
        self.types[name], self.allowed[name], self.sensitive[name] = kind, allowed, sensitive
        if "default" in decl and decl["default"] is not None:
            ok, _ = convert(decl["default"], kind, text=False)
            if not ok:
                self.error(path + ("default",), "variable.type", f"the default of variable {name!r} is not a {kind}",
                           f"write a {kind} value, or change variables.{name}.type")
            elif allowed is not None and convert(decl["default"], kind, text=False)[1] not in allowed:
                self.error(path + ("default",), "variable.not-allowed",
                           f"the default of variable {name!r} is not one of its allowed values",
                           f"use one of: {self._listing(name)}")

    def _converted_default(self, name: str, value: Any) -> Any:
        return convert(value, self.types[name], text=False)[1]

    def _listing(self, name: str) -> str:
        return ", ".join(json.dumps(v) for v in self.allowed[name] or [])

    def _accept(self, name: str, raw: Any, text: bool, origin: str, chosen: dict, fail) -> None:
        """Check `raw` for variable `name` and choose it; `fail(message, hint)` reports at the value's place."""
        kind, sensitive = self.types[name], self.sensitive[name]
        try:
            ok, value = convert(raw, kind, text=text, parse=self.parse)
        except DiagnosticError as exc:   # over the loader's bounds (nesting, aliases): said without the value
            said = exc.diagnostics[0].message.replace("the document ", "")
            fail("variable.too-large", f"variable {name!r}: its value {said}",
                 "give a smaller value: a list or map of a few levels, without YAML aliases (*name)")
            return
        shown = SENSITIVE_SHOWN if sensitive else json.dumps(raw) if not isinstance(raw, str) else short_text(repr(raw))
        if not ok:
            fail("variable.type", f"variable {name!r} is a {kind}: {shown} is not",
                 f"give a {kind}" + (" (true or false)" if kind == "bool" else
                                     " ([a, b] in YAML or JSON)" if kind == "list" else
                                     " ({k: v} in YAML or JSON)" if kind == "map" else ""))
            return
        allowed = self.allowed[name]
        if allowed is not None and value not in allowed:
            fail("variable.not-allowed", f"variable {name!r}: {shown} is not one of its allowed values",
                 f"use one of: {self._listing(name)}")
            return
        chosen[name] = Value(value, sensitive, origin)

    def _flag_fail(self, label: str):
        def fail(rule: str, message: str, hint: str) -> None:
            self.out.errors.append(Diagnostic("error", rule, f"{label}: {message}", None, None, None, hint))
        return fail

    def _plan_fail(self, name: str):
        def fail(rule: str, message: str, hint: str) -> None:
            self.out.errors.append(Diagnostic("error", rule, f"the saved plan's value: {message}", self.inputs.plan_file,
                                              None, None, says("make a new plan: ",
                                                               NextStep(("infra", "plan"), ("STACK", "--out", "FILE")))))
        return fail

    def from_environment(self, chosen: dict) -> None:
        for name in self.types:
            key = ENV_PREFIX + name
            if key in self.environ:
                self._accept(name, self.environ[key], True, key, chosen,
                             self._flag_fail(f"{key}={SENSITIVE_SHOWN if self.sensitive[name] else self.environ[key]}"))

    def from_flag(self, text: str, chosen: dict) -> None:
        name, eq, raw = text.partition("=")
        name = name.strip()
        if not eq or not name:
            self._flag_fail(f"--var {text}")("variable.flag", "expects NAME=VALUE", "write --var NAME=VALUE, e.g. --var env=prod")
            return
        label = f"--var {name}={SENSITIVE_SHOWN if self.sensitive.get(name, True) else raw}"
        if name not in self.types:   # its value is not echoed: it may be a secret meant for a misspelt name
            close = difflib.get_close_matches(name, list(self.types), n=1, cutoff=0.6)
            self._flag_fail(label)("variable.undeclared", f"no variable {name!r} is declared in {self.source.file}",
                                   f"did you mean {close[0]!r}?" if close else
                                   (f"declared: {', '.join(self.types)}" if self.types else
                                    f"declare it under `variables:` in {self.source.file}"))
            return
        self._accept(name, raw, True, f"--var {name}", chosen, self._flag_fail(label))

    def from_file(self, path: str, chosen: dict) -> None:
        try:
            data, where = self.read_file(path)
        except DiagnosticError as exc:
            for d in exc.diagnostics:
                self.out.errors.append(d if d.rule != "stack.not-found" else Diagnostic(
                    "error", "variable.file-not-found", f"no such var file: {path}", path, None, None,
                    "pass the path of a YAML or JSON file of NAME: VALUE lines"))
            return
        if data is None:
            return
        if not isinstance(data, dict):
            self.out.errors.append(where.diagnostic((), "variable.file", "a var file must be a mapping of NAME: VALUE",
                                                    "write one `NAME: VALUE` line per variable"))
            return
        for name, raw in data.items():
            if name not in self.types:
                close = difflib.get_close_matches(str(name), list(self.types), n=1, cutoff=0.6)
                self.out.warnings.append(where.diagnostic(
                    (name,), "variable.undeclared", f"{name!r} is not a variable of {self.source.file}; ignored",
                    f"did you mean {close[0]!r}?" if close else "remove it, or declare it under `variables:`",
                    "warning", key=True))
                continue
            line, column = where.position((name,))

            def fail(rule: str, message: str, hint: str, line=line, column=column) -> None:
                self.out.errors.append(Diagnostic("error", rule, f"var file {path}: {message}", path,
                                                  line, column, hint))

            # Terraform's conversions: a var file's "4" is a number, "true" a bool, as `--var nodes=4` is
            # (https://developer.hashicorp.com/terraform/language/expressions/type-constraints#conversion-of-primitive-types)
            as_text_given = isinstance(raw, str) and self.types[name] in ("number", "bool")
            self._accept(name, raw, as_text_given, f"{path}:{line}:{column}", chosen, fail)

    def from_plan(self, chosen: dict) -> None:
        """A saved plan's values; a sensitive one (kept as a digest) from its default or INFRA_VAR_<name>,
        which must be the value the plan was made with."""
        recorded = self.inputs.recorded or {}
        env_values: dict[str, Value] = dict(chosen)
        self.from_environment(env_values)
        for name in self.types:
            entry = recorded.get(name)
            if not isinstance(entry, dict):
                if name in env_values:
                    chosen[name] = env_values[name]
                continue
            if "value" in entry:   # checked as any value is: a plan file is data, and can be edited and resealed
                self._accept(name, entry["value"], False, "the saved plan", chosen, self._plan_fail(name))
                continue
            now = env_values.get(name)
            seal = self.inputs.seal
            if now is None or seal is None or not hmac.compare_digest(
                    seal(_digest_text(now.value)).encode(), str(entry.get("digest", "")).encode()):
                self.out.errors.append(Diagnostic(
                    "error", "variable.plan-sensitive", f"variable {name!r} is sensitive: the saved plan keeps only "
                    "its digest, and " + ("no value is set here" if now is None else
                                          "that digest is keyed with INFRA_PLAN_KEY, which is not set here"
                                          if seal is None else "the value set here differs"),
                    self.inputs.plan_file, None, None,
                    f"set {ENV_PREFIX}{name} to the value the plan was made with" +
                    (" and INFRA_PLAN_KEY to the key it was signed with" if seal is None else "") +
                    ", or make a new plan"))
                continue
            chosen[name] = now


def resolve(decls: Any, source: Any, environ: Mapping[str, str], inputs: Inputs, read_file: Callable,
            parse: Callable[[str], Any] | None = None) -> Resolved:
    """The value of every declared variable, with the diagnostics of the declarations and of each value given.
    `read_file(path)`: a var file's data and source map (stack/source.py reads it as YAML, JSON included);
    `parse(text)`: a list or map given as text (--var, INFRA_VAR_), read under the loader's bounds."""
    return _Resolver(decls, source, environ, inputs, read_file, parse).resolve()
