"""What a build context's Dockerfile says about the image Azure ML builds from it, read without building:
the final stage's base image (`FROM`, through `FROM stage` aliases, with `ARG` defaults resolved), the files
its stages COPY or ADD from the context (conda and pip files whose packages the image installs) and the
packages `RUN pip install` names. Pure: text in, facts out (rules.py reads the files).

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


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: comments dropped, `\\` line continuations joined. One pass:
    the pieces of a continued instruction are joined once, at its end."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []

    def add(whole: str) -> None:
        if whole:
            word, _, rest = whole.partition(" ")
            out.append((word.upper(), rest.strip()))

    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue   # a comment line inside a continued instruction is dropped, as Docker does
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
    flags_text = _LEADING_FLAGS.match(arguments.strip()).group()   # COPY --chown=x ["a", "b"]: flags before the array
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


_SHELL_SEPARATORS = frozenset(("&&", ";", "||", "|"))


def _pip_specs(command: str) -> list[str]:
    """Requirement specs of `pip install A B` (also `python -m pip`, several per RUN), options dropped. One pass
    over the words: the specs of an install run up to the next separator or the next `pip install`."""
    out: list[str] = []
    words = _words(command)
    installing = False
    i = 0
    while i < len(words):
        w = words[i]
        if i + 1 < len(words) and words[i + 1] == "install" and w.rsplit("/", 1)[-1] in ("pip", "pip3"):
            installing = True
            i += 2
            continue
        if w in _SHELL_SEPARATORS:
            installing = False
        elif installing and not w.startswith("-") and not w.startswith((".", "/", "git+", "http")):
            out.append(w)
        i += 1
    return out


def read_dockerfile(text: str) -> DockerfileFacts:
    args: dict[str, str] = {}                # ARGs declared before the first FROM (global, with defaults)
    stages: list[dict] = []                  # {"base", "alias", "copied", "pip"}
    for word, rest in _instructions(text):
        if word == "ARG" and not stages:
            name, eq, default = rest.partition("=")
            if name.strip() and eq and _words(default):   # `ARG BASE` without a default: set at build time
                args[name.strip()] = _words(default)[0]
        elif word == "FROM":
            words = [w for w in _words(rest) if not w.startswith("--")]
            base = _resolve(words[0], args) if words else None
            alias = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
            stages.append({"base": base, "alias": alias, "copied": [], "pip": []})
        elif word in ("COPY", "ADD") and stages:
            words = _words(rest)
            if any(w.startswith("--from") for w in words):
                continue
            sources = [w for w in words if not w.startswith("--")][:-1]
            stages[-1]["copied"].extend(sources)
        elif word == "RUN" and stages:
            stages[-1]["pip"].extend(_pip_specs(rest))
    if not stages:
        return DockerfileFacts(None, (), ())
    by_alias = {s["alias"]: s for s in stages if s["alias"]}
    stage, chain = stages[-1], [stages[-1]]
    while stage["base"] and stage["base"].lower() in by_alias and len(chain) < _MAX_STAGES:
        stage = by_alias[stage["base"].lower()]
        if stage in chain:
            break
        chain.append(stage)
    base = stage["base"] if stage["base"] and stage["base"].lower() not in by_alias else None
    if base is not None and "$" in base:
        base = None  # an ARG without a default: decided at build time
    return DockerfileFacts(base, tuple(p for s in chain for p in s["copied"]),
                           tuple(p for s in chain for p in s["pip"]))
