"""A team's own rules on a plan, in Rego (https://www.openpolicyagent.org/docs/policy-language), with conftest's
conventions (https://www.conftest.dev/): the input is the plan document exactly as `infra plan --json` prints it
(sensitive values already redacted), the package is `main` unless named, rules `deny`/`violation` (and `deny_*`,
`violation_*`) yield errors and `warn`/`warn_*` warnings, each a message string or an object with `msg`. Each result
is a diagnostic `policy.<package>.<rule>` at the rule's line in its policy file.

Policies run in a child process (policy_worker.py, the only code that loads regopy), bounded in time and memory: a
policy that loops or grows without end is stopped with a message, never hangs a plan or takes the machine's memory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from infra_cli.diagnostics import Diagnostic, Severity
from infra_cli.paths import project_root
from infra_cli.stack.secret import json_default

DEFAULT_FOLDER = "policy"          # conftest's default, looked for beside the stack up to its project's top
DEFAULT_NAMESPACE = "main"
NONE = "none"
RULE = re.compile(r"^(deny|violation|warn)(_[A-Za-z0-9_]+)?$")
_RULE_LINE = re.compile(r"^[ \t]*((?:deny|violation|warn)(?:_[A-Za-z0-9_]+)?)\b(?![ \t]*(?::=|=)[ \t]*\w+\()",
                        re.MULTILINE)
_PACKAGE = re.compile(r"^[ \t]*package[ \t]+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)", re.MULTILINE)
_NAMESPACE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_SOURCE_BYTES = 4 * 1024 * 1024   # all policy files together
MAX_RESULTS = 1000
MAX_MESSAGE = 2000
LANGUAGE = "https://www.openpolicyagent.org/docs/policy-language"
OFF_HINT = "or plan without policies: `--policy none`"


@dataclass(frozen=True)
class Limits:
    """How long (seconds) and how much memory (MiB, beyond the evaluator's own start) policies may take."""
    timeout: float = 10.0
    memory_mb: int = 1024


def policy_limits(environ: Mapping[str, str]) -> Limits:
    """`INFRA_POLICY_TIMEOUT` (seconds) and `INFRA_POLICY_MEMORY_MB`, where set; a value that is no positive number
    is refused by name."""
    limits = Limits()
    values: dict[str, Any] = {}
    for name, field, kind in (("INFRA_POLICY_TIMEOUT", "timeout", float), ("INFRA_POLICY_MEMORY_MB", "memory_mb", int)):
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            value = kind(raw)
        except ValueError:
            value = 0
        if not value > 0:
            raise ValueError(f"{name}={raw[:40]!r} is not a positive {'number' if kind is float else 'whole number'}")
        values[field] = value
    return Limits(**{**limits.__dict__, **values})


@dataclass(frozen=True)
class PolicyFile:
    path: Path
    shown: str        # as diagnostics name it
    source: str

    @property
    def package(self) -> str | None:
        found = _PACKAGE.search(self.source)
        return found.group(1) if found else None

    def rule_line(self, rule: str) -> int | None:
        for found in _RULE_LINE.finditer(self.source):
            if found.group(1) == rule:
                return self.source.count("\n", 0, found.start(1)) + 1
        return None


def _shown(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:   # another drive (Windows)
        return str(path)
    return str(path) if relative.startswith("..") else relative


def _error(rule: str, message: str, file: str | None = None, line: int | None = None, column: int | None = None,
           hint: str | None = None) -> Diagnostic:
    return Diagnostic("error", rule, message, file, line, column, hint)


def default_folder(stack: Path) -> Path | None:
    """The `policy/` folder nearest the stack: in its folder or a folder above it, up to its project's top."""
    start, top = Path(stack).resolve().parent, project_root(stack)
    for folder in (start, *start.parents):
        if (folder / DEFAULT_FOLDER).is_dir():
            return folder / DEFAULT_FOLDER
        if folder == top:
            break
    return None


def find_policies(given: Iterable[str], stack: Path) -> tuple[list[Path], list[Diagnostic]]:
    """The policy files `--policy` names (files, or folders searched for `*.rego`), `none` for none, or without
    the flag the default folder's; with the diagnostics for what cannot be read."""
    given = list(given)
    if given == [NONE]:
        return [], []
    if NONE in given:
        return [], [_error("policy.none-with-paths", "--policy none turns policies off: it takes no other --policy",
                           hint="give `--policy none` alone, or only the policy paths")]
    if not given:
        folder = default_folder(stack)
        given = [str(folder)] if folder is not None else []
    files: list[Path] = []
    problems: list[Diagnostic] = []
    for name in given:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.rego") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if not found:
                problems.append(Diagnostic("warning", "policy.empty-folder", f"{name} holds no .rego file: no policy "
                                           "was evaluated", name, None, None, "add a policy (`package main`, "
                                           "`deny contains msg if {...}`), or pass `--policy none`"))
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(_error("policy.not-found", f"no such policy file or folder: {name}", name,
                                   hint="name a .rego file or a folder of them, " + OFF_HINT))
    return list(dict.fromkeys(files)), problems


def _read(files: list[Path]) -> tuple[list[PolicyFile], list[Diagnostic]]:
    out, problems, total = [], [], 0
    for path in files:
        shown = _shown(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            problems.append(_error("policy.unreadable", f"cannot read {shown}: {exc.strerror}", shown,
                                   hint="make it readable, " + OFF_HINT))
            continue
        total += len(data)
        if total > MAX_SOURCE_BYTES:
            problems.append(_error("policy.too-large", f"the policies add up to more than "
                                   f"{MAX_SOURCE_BYTES // (1024 * 1024)} MiB (at {shown})", shown,
                                   hint="name only the policy files (`--policy FILE`), not a folder of data"))
            break
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            problems.append(_error("policy.invalid", f"{shown} is not UTF-8 text (byte {exc.start})", shown, line, 1,
                                   "Rego source is UTF-8: save it as such"))
            continue
        out.append(PolicyFile(path, shown, source))
    return out, problems


# regopy's errors (its native library's S-expressions): `(error 8:bad.rego|31|2 (errormsg 27:Invalid ...)`, a
# length-prefixed module name with a byte offset and length, then a length-prefixed message
_ERROR_AT = re.compile(r"\(error (\d+):")
_MESSAGE = re.compile(r"\(errormsg (\d+):")


def _sized(text: str, start: int, size: int) -> str:
    return text[start:start + size]


def _parse_errors(text: str) -> list[tuple[str | None, int | None, str]]:
    """(module name, byte offset, message) for each error regopy reported."""
    out = []
    for found in _MESSAGE.finditer(text):
        message = _sized(text, found.end(), int(found.group(1)))
        before = text[:found.start()]
        where = list(_ERROR_AT.finditer(before))
        name = offset = None
        if where:
            at = where[-1]
            name = _sized(before, at.end(), int(at.group(1)))
            rest = re.match(r"\|(\d+)\|", before[at.end() + len(name):])
            offset = int(rest.group(1)) if rest else None
        out.append((name, offset, message))
    return out


def _position(source: str, offset: int) -> tuple[int, int]:
    """Line and column (1-based) of a byte offset in the UTF-8 source."""
    head = source.encode("utf-8")[:offset].decode("utf-8", "replace")
    line = head.count("\n") + 1
    return line, len(head) - (head.rfind("\n") + 1) + 1


def _clean(text: str) -> str:
    text = _CONTROL.sub(" ", text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def _messages(value: Any) -> list[str]:
    """A rule's value as messages: a set (a JSON array) of strings or of objects with `msg`; a partial object
    (Rego v0's `deny[msg] {...}` read as v1) keyed by the messages; a single string."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, dict):
        items = [value] if "msg" in value else [k for k, v in value.items() if v not in (False, None)]
    elif isinstance(value, list):
        items = value
    elif value is True:
        items = ["(no message)"]
    else:
        items = []
    out = []
    for item in items:
        if isinstance(item, dict) and "msg" in item:
            item = item["msg"]
        out.append(_clean(item if isinstance(item, str) else json.dumps(item, sort_keys=True)))
    return out


def _worker_failed(done: subprocess.CompletedProcess | None, limits: Limits, names: str) -> Diagnostic:
    if done is None:
        return _error("policy.timeout", f"the policies ({names}) ran longer than {limits.timeout:g}s and were stopped",
                      hint="look for a rule that iterates over large ranges or recurses; set INFRA_POLICY_TIMEOUT "
                           "for more time, " + OFF_HINT)
    said = (done.stderr or b"").decode("utf-8", "replace")
    if "bad_alloc" in said or "snmalloc" in said or "MemoryError" in said or done.returncode in (-6, -9):
        return _error("policy.memory", f"the policies ({names}) used more than {limits.memory_mb} MiB of memory and "
                      "were stopped", hint="look for a rule that builds large collections; set INFRA_POLICY_MEMORY_MB "
                      "for more, " + OFF_HINT)
    last = _clean(said.strip().splitlines()[-1]) if said.strip() else f"exit status {done.returncode}"
    return _error("policy.failed", f"evaluating the policies ({names}) failed: {last}", hint=OFF_HINT)


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the policies' process inherits: where Python and its libraries are, nothing else. Rego's
    `opa.runtime().env` hands a policy the whole environment, where `INFRA_VAR_*` values, Azure credentials and
    INFRA_PLAN_KEY live; a policy reads the plan, redacted, and no secret."""
    keep = ("PATH", "LD_LIBRARY_PATH", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PYTHONHOME")
    return {k: v for k, v in environ.items() if k in keep}


def _located(diagnostics_for: list[PolicyFile], rule: str) -> tuple[str | None, int | None]:
    for policy in diagnostics_for:
        line = policy.rule_line(rule)
        if line is not None:
            return policy.shown, line
    return (diagnostics_for[0].shown, None) if diagnostics_for else (None, None)


def evaluate(document: dict, policies: list[PolicyFile], namespaces: list[str], limits: Limits) -> list[Diagnostic]:
    """Each deny/violation/warn result of `policies` on `document`, as diagnostics; or why they could not run."""
    modules = {f"policy{i}.rego": p for i, p in enumerate(policies)}
    request = {"modules": [[name, p.source] for name, p in modules.items()],
               "input": json.dumps(document, default=json_default),   # a Secret reaches a policy as its redacted form
               "namespaces": namespaces, "memory_mb": limits.memory_mb}
    names = ", ".join(p.shown for p in policies)
    worker = Path(__file__).with_name("policy_worker.py")
    try:
        done = subprocess.run([sys.executable, str(worker)], input=json.dumps(request).encode("utf-8"),
                              capture_output=True, timeout=limits.timeout, env=worker_environment(os.environ))
    except subprocess.TimeoutExpired:   # subprocess.run killed it
        return [_worker_failed(None, limits, names)]
    try:
        answer = json.loads(done.stdout.decode("utf-8")) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return [_worker_failed(done, limits, names)]
    if answer.get("missing"):
        return [_error("policy.regopy-missing", f"policies ({names}) need regopy, the Rego evaluator, which is not "
                       "installed", hint="`pip install 'infra-cli[policy]'` (or `pip install regopy`), " + OFF_HINT)]
    if "module_error" in answer:
        return [_module_error(text_error, modules) for text_error in _parse_errors(answer["module_error"])] or \
            [_error("policy.invalid", f"the policies ({names}) do not compile: {_clean(answer['module_error'])}",
                    hint=f"fix the Rego ({LANGUAGE}), " + OFF_HINT)]
    out: list[Diagnostic] = []
    for namespace, result in (answer.get("results") or {}).items():
        declaring = [p for p in policies if p.package == namespace]
        if "error" in result:
            parsed = _parse_errors(result["error"])
            why = "; ".join(_clean(m) for _n, _o, m in parsed) or _clean(result["error"])
            file, line = _located(declaring, "")
            missing = re.search(r"Function not found: ([\w.]+)", why)
            for policy in declaring if missing else ():   # the call's line, where the source shows it
                at = re.search(rf"(?<![\w.]){re.escape(missing.group(1))}\(", policy.source) if missing else None
                if at:
                    file, line = policy.shown, policy.source.count("\n", 0, at.start()) + 1
                    break
            out.append(_error("policy.error", f"evaluating package {namespace} failed: {why}", file, line,
                              1 if line else None, hint=f"fix the Rego ({LANGUAGE}), " + OFF_HINT))
            continue
        value = result.get("value")
        if not declaring:
            out.append(Diagnostic("warning", "policy.no-package", f"no policy declares package {namespace}: its rules "
                                  f"were not evaluated ({names})", policies[0].shown if policies else None, None, None,
                                  "start the policy with `package main`, or name its package: `--namespace NAME`"))
            continue
        count = 0
        for rule, rule_value in sorted((value or {}).items()) if isinstance(value, dict) else ():
            if not RULE.match(rule):
                continue
            severity: Severity = "warning" if rule.startswith("warn") else "error"
            file, line = _located(declaring, rule)
            for message in _messages(rule_value):
                count += 1
                if count > MAX_RESULTS:
                    break
                out.append(Diagnostic(severity, f"policy.{namespace}.{rule}", message, file, line, 1,
                                      f"a policy of yours ({file}) {'denies' if severity == 'error' else 'warns of'} "
                                      "this plan: change the stack, or the policy"))
    return out


def _module_error(error: tuple[str | None, int | None, str], modules: dict[str, PolicyFile]) -> Diagnostic:
    name, offset, message = error
    policy = modules.get(name or "")
    if policy is None:
        return _error("policy.invalid", f"Rego: {_clean(message)}", hint=f"fix the Rego ({LANGUAGE}), " + OFF_HINT)
    line, column = _position(policy.source, offset) if offset is not None else (None, None)
    return _error("policy.invalid", f"Rego: {_clean(message)}", policy.shown, line, column,
                  f"fix the Rego ({LANGUAGE}), " + OFF_HINT)


def check_plan(document: dict, stack: Path, given: Iterable[str], namespaces: Iterable[str],
               limits: Limits) -> list[Diagnostic]:
    """The policies `--policy` names (or the stack's default folder's), evaluated on the plan document."""
    namespaces = list(namespaces) or [DEFAULT_NAMESPACE]
    bad = [n for n in namespaces if not _NAMESPACE.match(n)]
    if bad:
        return [_error("policy.namespace", f"--namespace {bad[0][:80]!r} is not a Rego package name",
                       hint="a dotted name such as `main` or `team.gpu`")]
    files, problems = find_policies(given, stack)
    if any(d.severity == "error" for d in problems):
        return problems
    policies, unreadable = _read(files)
    if unreadable or not policies:
        return problems + unreadable
    return problems + evaluate(document, policies, list(dict.fromkeys(namespaces)), limits)
