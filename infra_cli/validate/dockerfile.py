"""What a build context's Dockerfile says about the image Azure ML builds from it, read without building:
the final stage's base image (`FROM`, through `FROM stage` aliases, with `ARG` defaults resolved), the files
its stages COPY or ADD from the context (conda and pip files whose packages the image installs) and the
packages `RUN pip install` names. Pure: text in, facts out (validate/rules/carries.py reads the files).

Reference: https://docs.docker.com/reference/dockerfile/ (FROM, ARG before FROM, COPY/ADD, line continuations).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_ARG_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+]([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_MAX_STAGES = 64   # `FROM a AS b` chains followed this far, no further


@dataclass(frozen=True)
class DockerfileFacts:
    base_image: str | None         # the final stage's base, ARG defaults filled in (None: unknown)
    copied: tuple[str, ...]        # context paths the image's stages COPY/ADD (not --from another stage)
    pip_installs: tuple[str, ...]  # requirement specs `RUN pip install` names directly


@dataclass(frozen=True)
class Instruction:
    word: str        # FROM, RUN, ... (upper-cased)
    arguments: str   # continuation lines joined
    line: int        # the line it starts on (1-based)


def instructions(text: str) -> list[Instruction]:
    """Each instruction with the line it starts on: comments dropped, `\\` line continuations joined. One pass:
    the pieces of a continued instruction are joined once, at its end."""
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0

    def add(whole: str) -> None:
        if whole:
            word, _, rest = whole.partition(" ")
            out.append(Instruction(word.upper(), rest.strip(), start))

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue   # a comment line inside a continued instruction is dropped, as Docker does
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        add(" ".join(pending).strip())
        pending = []
    if pending:
        add(" ".join(pending).strip())
    return out


def _resolve(value: str, args: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        return args.get(name, m.group(2) or "") if name in args or m.group(2) is not None else m.group(0)
    return _ARG_REF.sub(one, value)


# A shell word as shlex.split (POSIX mode) reads one: unquoted text, a backslash escape, a 'single' or "double"
# quoted part, glued together; between blanks. One regex match per word keeps the reading
# linear in the text (each piece is matched once; the alternatives never overlap, so nothing backtracks).
_SHELL_WORD = re.compile(r"""(?:[^ \t\r\n'"\\]+|\\[\s\S]|'[^']*'|"(?:[^"\\]|\\[\s\S])*")+""")
_SHELL_PIECE = re.compile(r"([^'\"\\]+)|\\([\s\S])|'([^']*)'|\"((?:[^\"\\]|\\[\s\S])*)\"")
_QUOTING = re.compile(r"['\"\\]")
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([\\"])')   # inside "...", shlex drops a backslash before " or \ only
_LEADING_FLAGS = re.compile(r"(?:--[^ ]* +)*")


def _unquote(piece: re.Match) -> str:
    plain, escaped, single, double = piece.groups()
    if plain is not None or single is not None:
        return plain if plain is not None else single
    return escaped if escaped is not None else _DOUBLE_QUOTED_ESCAPE.sub(r"\1", double)


def shell_words(text: str) -> list[str]:
    """`text` split into words as shlex.split(text) splits it (POSIX mode, no comments), in time linear in its
    length; ValueError for an unclosed quote or a trailing backslash, as shlex raises."""
    words: list[str] = []
    last = 0
    for m in _SHELL_WORD.finditer(text):
        if text[last:m.start()].strip(" \t\r\n"):   # a quote or backslash no word could take
            break
        token = m.group()
        words.append(_SHELL_PIECE.sub(_unquote, token) if _QUOTING.search(token) else token)
        last = m.end()
    else:
        if not text[last:].strip(" \t\r\n"):
            return words
    rest = text[last:].lstrip(" \t\r\n")
    raise ValueError("No closing quotation" if rest[:1] in ("'", '"') else "No escaped character")


def _words(arguments: str) -> list[str]:
    """The words of an instruction's arguments: its exec (JSON array) form, else as a shell splits them."""
    flags = _LEADING_FLAGS.match(arguments.strip())   # COPY --chown=x ["a", "b"]: flags before the array
    flags_text = flags.group() if flags else ""
    text = arguments.strip()[len(flags_text):].lstrip()
    if text.startswith("["):
        try:
            array = json.loads(text)
        except ValueError:
            array = None
        if isinstance(array, list) and all(isinstance(w, str) for w in array):
            return flags_text.split() + array
    try:
        return shell_words(arguments)
    except ValueError:
        return arguments.split()


_SHELL_SEPARATORS = frozenset(("&&", ";", "||", "|", "&"))
# Words before a command that are not the command: shell keywords and wrappers that run the next word.
_LEADING_KEYWORDS = frozenset(("if", "then", "else", "elif", "do", "while", "until", "!", "{", "(", "time", "exec",
                               "nohup", "sudo", "command"))
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SHELLS = frozenset(("sh", "bash", "dash"))
_GLUED = re.compile(r"(&&|\|\||;)")
_MAX_SHELL_DEPTH = 4   # `sh -c "sh -c '...'"` read this deep, no deeper


@dataclass(frozen=True)
class SimpleCommand:
    """One command of a RUN line: its words (the command word first) and the VAR=value words before it."""
    words: tuple[str, ...]
    assignments: dict[str, str]

    @property
    def name(self) -> str:
        return self.words[0] if self.words else ""


def _command(words: list[str]) -> SimpleCommand:
    assignments: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w in _LEADING_KEYWORDS or w == "env":
            i += 1
        elif _ASSIGNMENT.match(w):
            name, _, value = w.partition("=")
            assignments[name] = value
            i += 1
        else:
            break
    return SimpleCommand(tuple(words[i:]), assignments)


def run_commands(arguments: str, _depth: int = 0) -> list[SimpleCommand]:
    """The simple commands of a RUN instruction's arguments (shell or exec form), in order: split at `&&`, `;`,
    `||`, `|`; leading keywords (`if`, `sudo`, `env`) and VAR=value words set aside; `sh -c "..."` read inside."""
    out: list[SimpleCommand] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            command = _command(current)
            inner = _shell_script(command)
            if inner is not None and _depth < _MAX_SHELL_DEPTH:
                out.extend(run_commands(inner, _depth + 1))
            elif command.words:
                out.append(command)
            current.clear()

    words = _words(arguments)
    if _depth == 0:   # RUN --mount=... --network=...: the instruction's flags, not the command
        while words and words[0].startswith("--"):
            words.pop(0)
    for word in words:
        # `python3-pip&&pip` glued to its separator: split where no blank says the word was a quoted script
        pieces = _GLUED.split(word) if _GLUED.search(word) and not any(c.isspace() for c in word) else [word]
        for w in pieces:
            if w in _SHELL_SEPARATORS:
                flush()
            elif w:
                current.append(w)
    flush()
    return out


def _shell_script(command: SimpleCommand) -> str | None:
    """The script of `sh -c SCRIPT` (bash, dash too), else None."""
    words = command.words
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-ec", "-ex", "-exc", "-xc"):
        return words[2]
    return None


_PIP_OPTIONS_WITH_VALUE = frozenset((
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url", "-f",
    "--find-links", "--no-binary", "--only-binary", "-t", "--target", "--prefix", "--root", "--trusted-host",
    "--platform", "--python-version", "--implementation", "--abi", "--src", "--upgrade-strategy", "--progress-bar",
    "--log", "--cache-dir", "--proxy", "--retries", "--timeout", "--exists-action", "--cert", "--client-cert",
    "--config-settings", "-C", "--global-option", "--build-option", "--python", "--report", "--keyring-provider",
    "--root-user-action"))
_PIP_UNREADABLE = frozenset(("-r", "--requirement", "-e", "--editable"))   # installs what a file or folder says
_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")


@dataclass(frozen=True)
class PipInstall:
    """One `pip install` command: the requirement specs it names, the packages it builds from source
    (--no-binary, PIP_NO_BINARY; `:all:` for every one), what it installs that cannot be read from the words
    (-r FILE, -e DIR, a path or URL), and the interpreter word that runs pip (`pip`, `python3`, ...)."""
    specs: tuple[str, ...]
    no_binary: frozenset[str]
    unreadable: tuple[str, ...]
    runner: str


def pip_install(command: SimpleCommand) -> PipInstall | None:
    """`pip install ...`, `pip3 install ...`, `python3 -m pip install ...` read; None for any other command."""
    words = list(command.words)
    runner = words[0].rsplit("/", 1)[-1] if words else ""
    if len(words) >= 2 and re.fullmatch(r"pip3?(?:\.\d+)?", runner) and words[1] == "install":
        rest = words[2:]
    elif len(words) >= 4 and _PYTHON.fullmatch(runner) and words[1:4] == ["-m", "pip", "install"]:
        rest = words[4:]
    else:
        return None
    specs: list[str] = []
    unreadable: list[str] = []
    no_binary = {n for n in command.assignments.get("PIP_NO_BINARY", "").split(",") if n}
    i = 0
    while i < len(rest):
        w = rest[i]
        option, eq, value = w.partition("=")
        if w.startswith("-") and option in _PIP_OPTIONS_WITH_VALUE:
            if not eq:
                i += 1
                value = rest[i] if i < len(rest) else ""
            if option == "--no-binary":
                no_binary |= {n for n in value.split(",") if n}
            elif option in _PIP_UNREADABLE:
                unreadable.append(f"{option} {value}")
        elif w.startswith("-"):
            pass
        elif w.rsplit("/", 1)[-1] in ("pip", "pip3") and i + 1 < len(rest) and rest[i + 1] == "install":
            i += 1   # `pip install a pip install b`: read as two installs, as written
        elif w.startswith((".", "/", "~")) or "://" in w or w.startswith("git+"):
            unreadable.append(w)
        else:
            specs.append(w)
        i += 1
    return PipInstall(tuple(specs), frozenset(pip_name(n) if n != ":all:" else n for n in no_binary),
                      tuple(unreadable), runner)


def pip_name(spec: str) -> str:
    """'DeepSpeed[all]>=0.14' -> 'deepspeed' (PEP 503 normalised enough for our profile names)."""
    return re.split(r"[\[<>=!~;@ (]", str(spec).strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pip_specs(command: str) -> list[str]:
    """Requirement specs of `pip install A B` (also `python -m pip`, several per RUN), options and their values
    dropped."""
    return [spec for c in run_commands(command) if (p := pip_install(c)) for spec in p.specs]


@dataclass(frozen=True)
class Stage:
    """One FROM and what follows it: the base (ARG defaults filled in; None: decided at build time), the alias
    (`AS name`, lower-cased), the instructions after it, and the line of the FROM."""
    base: str | None
    alias: str | None
    line: int
    body: tuple[Instruction, ...]


def stages(text: str) -> list[Stage]:
    args: dict[str, str] = {}                # ARGs declared before the first FROM (global, with defaults)
    out: list[tuple[str | None, str | None, int, list[Instruction]]] = []
    for ins in instructions(text):
        if ins.word == "ARG" and not out:
            name, eq, default = ins.arguments.partition("=")
            if name.strip() and eq and _words(default):   # `ARG BASE` without a default: set at build time
                args[name.strip()] = _words(default)[0]
        elif ins.word == "FROM":
            words = [w for w in _words(ins.arguments) if not w.startswith("--")]
            base = _resolve(words[0], args) if words else None
            alias = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
            out.append((None if base is not None and "$" in base else base, alias, ins.line, []))
        elif out:
            out[-1][3].append(ins)
    return [Stage(base, alias, line, tuple(body)) for base, alias, line, body in out]


def read_dockerfile(text: str) -> DockerfileFacts:
    all_stages = stages(text)
    if not all_stages:
        return DockerfileFacts(None, (), ())
    by_alias = {s.alias: s for s in all_stages if s.alias}
    stage, chain = all_stages[-1], [all_stages[-1]]
    while stage.base and stage.base.lower() in by_alias and len(chain) < _MAX_STAGES:
        stage = by_alias[stage.base.lower()]
        if stage in chain:
            break
        chain.append(stage)
    base = stage.base if stage.base and stage.base.lower() not in by_alias else None
    copied: list[str] = []
    pip: list[str] = []
    for s in chain:
        for ins in s.body:
            if ins.word in ("COPY", "ADD"):
                words = _words(ins.arguments)
                if not any(w.startswith("--from") for w in words):
                    copied.extend([w for w in words if not w.startswith("--")][:-1])
            elif ins.word == "RUN":
                pip.extend(_pip_specs(ins.arguments))
    return DockerfileFacts(base, tuple(copied), tuple(pip))
