"""What a distribution's `command` launches, read the way a shell would (shlex), without running anything.

`parse_command` finds the training step of a command line (after `cd x &&`, `;`, `A=1` prefixes, `env`,
`exec`, inside `bash -c "..."`), then names the launcher it starts (from validators/launchers.yaml: mpirun,
torchrun / `python -m torch.distributed.run|launch`, deepspeed, accelerate launch...), the launcher's flags by
role (processes per node, nodes, node rank, rendezvous address) and the training script with its arguments.
Values stay as written (`8`, `$NODE_RANK`, `${{inputs.nodes}}`): `count` reads a literal number, `variables`
the shell variables a value refers to. Pure: the launcher table is an argument (`launcher_for` alone reads the
tables of validators/, for the stack model).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from infra_cli.knowledge.frameworks import frameworks
from infra_cli.knowledge.launchers import LauncherSpec, LauncherTable, launchers

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n", ";;"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT = re.compile(r"^[<>&]+$")
_FD_PREFIX = re.compile(r"(?<=\s)\d+(?=[<>])")
# $NAME or ${NAME}, but not Azure ML's ${{inputs.x}} placeholders
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_PLACEHOLDER = re.compile(r"\$\{\{[^}]*\}\}")
_INTERPRETER_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "-Q"})
_MAX_DEPTH = 4  # `bash -c "bash -c ..."` / `mpirun mpirun ...` read this deep, no deeper


class CommandSyntaxError(ValueError):
    """The command is not valid shell (an unclosed quote): bash would refuse it too."""


@dataclass(frozen=True)
class Launch:
    """The training step of a command: which launcher starts what, with which flags."""

    kind: str                     # head-node | per-node | script (python runs it directly) | other
    launcher: LauncherSpec | None
    invoked_as: str               # the words that start it, e.g. "python -m torch.distributed.launch"
    options: dict[str, str | None]  # the launcher's flags as written (None: a flag without a value)
    script: str | None            # the training script (or `-m module`) the launcher or python runs
    script_args: tuple[str, ...]

    @property
    def spec(self) -> LauncherSpec:
        """The launcher of a head-node or per-node step, which always has one (a script or other step has none)."""
        if self.launcher is None:
            raise ValueError(f"{self.invoked_as!r} is a {self.kind} step: it starts no launcher")
        return self.launcher

    def role(self, role: str) -> str | None:
        """The value of the launcher flag playing `role` (e.g. nodes -> '2'), or None when not given."""
        if self.launcher is None:
            return None
        for flag in self.launcher.flags.get(role, ()):
            if flag in self.options:
                return self.options[flag] or ""
        return None

    def script_option(self, names) -> str | None:
        """The value of a script argument among `names` (`--x v` or `--x=v`); '' for a bare flag."""
        args = self.script_args
        for i, arg in enumerate(args):
            for name in names:
                if arg == name:
                    nxt = args[i + 1] if i + 1 < len(args) else ""
                    return "" if nxt.startswith("--") else nxt
                if arg.startswith(name + "="):
                    return arg[len(name) + 1:]
        return None


def count(value: str | None) -> int | None:
    """A literal whole number as written, else None (a variable, a placeholder, `auto`)."""
    if value is None:
        return None
    text = value.strip()
    return int(text) if text.isdigit() else None


def variables(value: str | None) -> set[str]:
    """Shell variables a value refers to ($NAME, ${NAME}); Azure ML's ${{inputs.x}} placeholders are not."""
    if not value:
        return set()
    text = _PLACEHOLDER.sub("", value)
    return {a or b for a, b in _VARIABLE.findall(text)}


def _substitutions(text: str) -> list[tuple[int, int]]:
    """The spans of the command substitutions (`$( )`, backticks) that stand outside quotes, each read to its
    own closing `)` or backtick with whatever it nests (pipes, `;`, quotes, more substitutions): to bash one
    piece of a word, never a separator. Iterative (a stack of open contexts), so nesting costs no recursion.
    Raises CommandSyntaxError for one left open, as bash refuses it."""
    spans: list[tuple[int, int]] = []
    stack: list[list] = []   # [kind, open parentheses, start]; kind: sub ($( )), tick (backticks), dq ("...")
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        kind = stack[-1][0] if stack else None
        if c == "\\":
            i += 2
            continue
        if c == "'" and kind != "dq":          # single quotes: literal to their end (shlex judges an open one)
            end = text.find("'", i + 1)
            if end < 0:
                break
            i = end + 1
            continue
        if text.startswith("$(", i):
            stack.append(["sub", 0, i])
            i += 2
            continue
        if c == "`" and kind == "tick":
            start = stack.pop()[2]
            if not stack:
                spans.append((start, i + 1))
        elif c == "`":
            stack.append(["tick", 0, i])
        elif c == '"' and kind == "dq":
            stack.pop()
        elif c == '"':
            stack.append(["dq", 0, i])
        elif kind == "sub" and c == "(":
            stack[-1][1] += 1
        elif kind == "sub" and c == ")":
            if stack[-1][1]:
                stack[-1][1] -= 1
            else:
                start = stack.pop()[2]
                if not stack:
                    spans.append((start, i + 1))
        i += 1
    opened = [entry for entry in stack if entry[0] != "dq"]
    if opened:
        what = "$(" if opened[0][0] == "sub" else "`"
        raise CommandSyntaxError(f"{what} at character {opened[0][2] + 1} is never closed")
    return spans   # only those opened outside every other context: disjoint, in order


def _protect(text: str) -> tuple[str, str, list[str]]:
    """`text` with each top-level substitution replaced by a marker word shlex keeps whole (TAG k TAG), the
    tag, and the substitutions' original text (put back into the words afterwards)."""
    spans = _substitutions(text)
    tag = "\x00"
    while tag in text:               # a marker no command contains
        tag += "\x00"
    out, last = [], 0
    for k, (start, end) in enumerate(spans):
        out += [text[last:start], f"{tag}{k}{tag}"]
        last = end
    out.append(text[last:])
    return "".join(out), tag, [text[start:end] for start, end in spans]


def _restore(word: str, tag: str, saved: list[str]) -> str:
    if not saved or tag not in word:
        return word
    return re.sub(re.escape(tag) + r"(\d+)" + re.escape(tag), lambda m: saved[int(m.group(1))], word)


def _words(command: str) -> list[str]:
    text = command.replace("\\\r\n", " ").replace("\\\n", " ")  # line continuations
    text, tag, saved = _protect(text)  # `$(echo $X | cut -d: -f1)` is one piece of a word, not a pipeline
    text = _FD_PREFIX.sub("", text)  # `2>&1`, `2>err`: the descriptor is no argument of the program
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"       # a newline ends a command, as in the shell
    lexer.whitespace_split = True
    lexer.commenters = ""            # `#` only starts a comment at a word's start; rarely matters here
    try:
        return [_restore(w, tag, saved) for w in lexer]
    except ValueError as exc:
        raise CommandSyntaxError(str(exc)) from None


def _segments(words: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w in _SEPARATORS:
            out.append([])
        elif _REDIRECT.match(w):   # `> log`, `>&1`: the target is no argument of the program
            skip_next = True
        else:
            out[-1].append(w)
    return [s for s in out if s]


def _flags(words: list[str], boolean: frozenset[str]) -> tuple[dict[str, str | None], int]:
    """Leading `--flag value` / `--flag=value` / boolean flags; returns them and where the program starts."""
    options: dict[str, str | None] = {}
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        w = words[i]
        if w == "--":
            return options, i + 1
        if "=" in w and w.startswith("--"):
            k, v = w.split("=", 1)
            options[k] = v
            i += 1
        elif w in boolean or i + 1 >= len(words):
            options[w] = None
            i += 1
        else:
            options[w] = words[i + 1]
            i += 2
    return options, i


def _script(words: list[str]) -> tuple[str | None, tuple[str, ...]]:
    if not words:
        return None, ()
    if words[0] in ("-m", "--module") and len(words) > 1:
        return f"-m {words[1]}", tuple(words[2:])
    return words[0], tuple(words[1:])


def _interpreter_program(words: list[str]) -> int:
    """Index of the program after `python [options]` (skipping -u, -O, -W arg...)."""
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] not in ("-m", "-c", "-"):
        i += 2 if words[i] in _INTERPRETER_OPTIONS_WITH_VALUE else 1
    return i


def _launcher_launch(spec: LauncherSpec, invoked: list[str], rest: list[str], table: LauncherTable,
                     depth: int) -> Launch:
    options, start = _flags(rest, spec.boolean_flags)
    program = rest[start:]
    kind = spec.kind
    if kind == "per-node" and spec.head_node_flags and any(f in options for f in spec.head_node_flags) \
            and not any(f in options for f in spec.per_node_flags):
        kind = "head-node"
    if spec.kind == "head-node":
        # mpirun python train.py -> train.py (bounded: `mpirun mpirun ...` nests no deeper than bash -c does)
        inner = _step(program, table, depth + 1) if program and depth < _MAX_DEPTH else None
        inner = training_step(inner) if isinstance(inner, list) else inner
        script, args = (inner.script, inner.script_args) if inner else _script(program)
    elif program and table.is_python(program[0]):   # torchrun --no_python python train.py
        script, args = _script(program[_interpreter_program(program):])
    else:
        script, args = _script(program)
    return Launch(kind, spec, " ".join(invoked), options, script, args)


def _step(words: list[str], table: LauncherTable, depth: int) -> Launch | list[Launch] | None:
    """What one simple command runs (the steps inside `bash -c`), or None for one that runs no training
    (cd, export, pip...)."""
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT.match(w):
            i += 1
        elif w in table.wrappers:
            i += 1
            while i < len(words) and (words[i].startswith("-") or (w == "env" and _ASSIGNMENT.match(words[i]))):
                i += 1
        else:
            break
    words = words[i:]
    if not words:
        return None
    exe = words[0].rsplit("/", 1)[-1]
    if exe in table.shells and "-c" in words[1:] and depth < _MAX_DEPTH:
        inner = words[words.index("-c") + 1:]
        return _steps(inner[0], table, depth + 1) if inner else None
    for spec in table.launchers:
        for cmd in spec.commands:
            if [exe, *words[1:len(cmd)]] == list(cmd):
                return _launcher_launch(spec, words[:len(cmd)], words[len(cmd):], table, depth)
    if table.is_python(words[0]):
        at = _interpreter_program(words)
        if at + 1 < len(words) and words[at] == "-m":
            for spec in table.launchers:
                if words[at + 1] in spec.python_modules:
                    return _launcher_launch(spec, words[:at + 2], words[at + 2:], table, depth)
            if words[at + 1] in ("pip", "ensurepip", "venv"):
                return None
        script, args = _script(words[at:])
        return Launch("script", None, words[0], {}, script, args) if script and script != "-c" else \
            Launch("script", None, words[0], {}, None, ())
    if exe in ("cd", "export", "set", "source", ".", "echo", "pip", "pip3", "mkdir", "ls", "cp", "nvidia-smi",
               "true", ":", "unset", "ulimit", "conda", "apt-get", "rm", "cat", "tar", "wget", "curl"):
        return None
    return Launch("other", None, words[0], {}, None, tuple(words[1:]))


def _steps(command: str, table: LauncherTable, depth: int) -> list[Launch]:
    out: list[Launch] = []
    for segment in _segments(_words(command)):
        step = _step(segment, table, depth)
        if step is not None:
            out.extend(step) if isinstance(step, list) else out.append(step)
    return out


def training_step(steps: list[Launch]) -> Launch | None:
    """The step Azure ML's processes train with: the first launcher, else the last python script."""
    for s in steps:
        if s.kind in ("head-node", "per-node"):
            return s
    scripts = [s for s in steps if s.kind == "script"]
    if scripts:
        return scripts[-1]    # `python prepare.py && python train.py`: the last one trains
    return steps[-1] if steps else None


def parse_steps(command: str, table: LauncherTable) -> list[Launch]:
    """Every step of `command` that runs a program, in order. Raises CommandSyntaxError."""
    return _steps(command, table, 0)


def parse_command(command: str, table: LauncherTable) -> Launch | None:
    """The training step of `command`; None if it runs nothing recognisable. Raises CommandSyntaxError."""
    return training_step(parse_steps(command, table))


def derived_launcher(command: str | None, table: LauncherTable, script_launch: str) -> str | None:
    """`per-node` when the command starts a per-node launcher; for a script run directly, `script_launch`
    (the framework's: Lightning starts its own processes per node); None when it cannot be told
    (no command, a head-node launcher, a command that is not valid shell)."""
    if not command:
        return None
    try:
        step = parse_command(command, table)
    except CommandSyntaxError:
        return None
    if step is None or step.kind == "head-node":
        return None
    return "per-node" if step.kind == "per-node" else script_launch if step.kind == "script" else None


def launcher_for(command: str | None, framework: str | None) -> str | None:
    """The launcher a distribution's command implies (see derived_launcher), read against validators/; with
    no command, the framework's own (Lightning: per-node); None when nothing says."""
    fw = frameworks().get(framework) if framework else None
    script_launch = fw.script_launch if fw else "per-process"
    if not command:
        return script_launch if fw and script_launch != "per-process" else None
    return derived_launcher(command, launchers(), script_launch)
