"""What a build context's Dockerfile says about the image Azure ML builds from it, read without building:
the final stage's base image (`FROM`, through `FROM stage` aliases, with `ARG` defaults resolved), the files
its stages COPY or ADD from the context (conda and pip files whose packages the image installs) and the
packages `RUN pip install` names. Pure: text in, facts out (rules.py reads the files).

Reference: https://docs.docker.com/reference/dockerfile/ (FROM, ARG before FROM, COPY/ADD, line continuations).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

_ARG_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+]([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_MAX_STAGES = 64   # `FROM a AS b` chains followed this far, no further


@dataclass(frozen=True)
class DockerfileFacts:
    base_image: str | None         # the final stage's base, ARG defaults filled in (None: unknown)
    copied: tuple[str, ...]        # context paths the image's stages COPY/ADD (not --from another stage)
    pip_installs: tuple[str, ...]  # requirement specs `RUN pip install` names directly


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: comments dropped, `\\` line continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue   # a comment line inside a continued instruction is dropped, as Docker does
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        if whole:
            word, _, rest = whole.partition(" ")
            out.append((word.upper(), rest.strip()))
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _resolve(value: str, args: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        return args.get(name, m.group(2) or "") if name in args or m.group(2) is not None else m.group(0)
    return _ARG_REF.sub(one, value)


def _words(arguments: str) -> list[str]:
    """The words of an instruction's arguments: its exec (JSON array) form, else as a shell splits them."""
    text = arguments.strip()
    flags = []
    while text.startswith("--") and " " in text:      # COPY --chown=x ["a", "b"]: flags before the array
        flag, text = text.split(" ", 1)
        flags.append(flag)
        text = text.lstrip()
    if text.startswith("["):
        try:
            array = json.loads(text)
        except ValueError:
            array = None
        if isinstance(array, list) and all(isinstance(w, str) for w in array):
            return flags + array
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def _pip_specs(command: str) -> list[str]:
    """Requirement specs of `pip install A B` (also `python -m pip`, several per RUN), options dropped."""
    out: list[str] = []
    words = _words(command)
    for i, w in enumerate(words):
        if w.rsplit("/", 1)[-1] in ("pip", "pip3") and i + 1 < len(words) and words[i + 1] == "install":
            for arg in words[i + 2:]:
                if arg in ("&&", ";", "||", "|"):
                    break
                if not arg.startswith("-") and not arg.startswith((".", "/", "git+", "http")):
                    out.append(arg)
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
