"""Whether a Dockerfile's RUN steps can run: each step's commands and packages need things (python3 and pip, a
C compiler, MPI's and Python's headers, torch installed first), and only the base image or an earlier step can
provide them (validators/base_images.yaml says what each provides and needs). Pure: text in, problems out.

The steps are read in order, stage by stage (`FROM stage` starts from what that stage ended with). A need
neither the base nor an earlier step provides is a problem at the step's line. Where the check cannot know
what is there (a base image the data does not describe, a step after `pip install -r FILE`, a script, `make
install` or conda), it refuses nothing: it judges only what it can prove.

Reference: https://docs.docker.com/reference/dockerfile/#run (each RUN runs in a shell on the image so far).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra_cli.knowledge.base_images import BaseImage, BuildKnowledge, build_knowledge
from infra_cli.validate.dockerfile import PipInstall, SimpleCommand, pip_install, pip_name, run_commands, stages

_MAX_SHOWN = 120   # characters of a step quoted in a message


@dataclass(frozen=True)
class BuildProblem:
    line: int        # the RUN instruction's first line
    step: str        # the command at fault, as written (shortened)
    message: str
    hint: str


_PYTHON, _SYSTEM = "python", "system"


@dataclass
class _State:
    provided: set[str]
    unknown: dict[str, str]      # which kind of thing (python packages, system ones) can no longer be known, and why
    base: str                    # what the stage started from, for messages

    def judged(self, names: set[str], python_packages: set[str]) -> list[str]:
        """The names among `names` the check can still prove absent ('a|b': one of a group)."""
        return sorted(n for n in names
                      if (_PYTHON if n.split("|")[0] in python_packages else _SYSTEM) not in self.unknown)

    def forget(self, kinds: tuple[str, ...], why: str) -> None:
        for kind in kinds:
            self.unknown.setdefault(kind, why)


def _quoted(command: SimpleCommand) -> str:
    text = " ".join(command.words)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:4])


def _below(spec: str, since: tuple[int, ...]) -> bool:
    """Whether `spec` allows only versions below `since` (==V, ===V, <V, <=V, ~=V below it)."""
    for op, version in re.findall(r"(===|==|<=|<|~=)\s*([0-9][0-9A-Za-z.*+!-]*)", spec):
        v = _version(version)
        if not v:
            continue
        if op == "~=" and len(v) > 1:
            v = (*v[:-2], v[-2] + 1)    # ~=3.1 allows below 4, ~=3.1.2 below 3.2
        if (v < since) or (op == "<" and v <= since):
            return True
    return False


def _builds(name: str, spec: str, pip: PipInstall, knowledge: BuildKnowledge) -> bool:
    package = knowledge.pip_packages[name]
    if name in pip.no_binary or ":all:" in pip.no_binary:
        return True
    if package.built_always:
        return True
    return package.wheels_since is not None and _below(spec, package.wheels_since)


def _what(names: list[str], knowledge: BuildKnowledge) -> str:
    """'a|b' names one of a group: 'A or B'."""
    return ", ".join(" or ".join(knowledge.capabilities[one].what for one in n.split("|")) for n in names)


def _fix(names: list[str], knowledge: BuildKnowledge) -> str:
    """How to get `names` in one earlier step: the apt packages in one apt-get line, the rest as written."""
    apt: list[str] = []
    other: list[str] = []
    for n in names:
        fix = knowledge.capabilities[n.split("|")[0]].fix
        m = re.fullmatch(r"apt-get install -y ([a-z0-9.+-]+)(?: \(.*\))?", fix)
        if m:
            apt.append(m.group(1))
        elif fix not in other:
            other.append(fix)
    ways = ([f"RUN apt-get update && apt-get install -y --no-install-recommends {' '.join(dict.fromkeys(apt))}"]
            if apt else []) + other
    return "; ".join(ways)


class _Judge:
    def __init__(self, knowledge: BuildKnowledge):
        self.k = knowledge
        self.problems: list[BuildProblem] = []
        self.python_packages = set(knowledge.pip_packages) | {
            n for p in knowledge.pip_packages.values() for n in p.provides}

    def refuse(self, state: _State, line: int, command: SimpleCommand, missing: dict[str, list[str]]) -> None:
        """One problem for a command: `missing` maps why (the command, or a package it installs) to what lacks."""
        names = list(dict.fromkeys(n for lacking in missing.values() for n in lacking))
        whys = "; ".join(f"{why} needs {_what(lacking, self.k)}" for why, lacking in missing.items())
        self.problems.append(BuildProblem(
            line, _quoted(command),
            f"RUN `{_quoted(command)}` cannot run: {whys}, and neither the base image ({state.base}) nor an "
            f"earlier step provides {'it' if len(names) == 1 else 'them'}",
            f"provide {'it' if len(names) == 1 else 'them'} in an earlier step: {_fix(names, self.k)} "
            "(validators/base_images.yaml says what each base image and package provides)"))

    def step(self, state: _State, line: int, command: SimpleCommand) -> None:
        words = command.words
        name = words[0]
        pip = pip_install(command)
        needs = set(self.k.commands.get(name) or self.k.commands.get(name.rsplit("/", 1)[-1]) or ())
        if pip is not None and pip.runner not in ("pip", "pip3"):
            needs |= set(self.k.commands.get(pip.runner, ())) | {"pip"}
        missing: dict[str, list[str]] = {}
        if needs - state.provided:
            missing[f"`{name}`"] = sorted(needs - state.provided)
        if pip is not None:
            missing.update(self.pip_needs(state, pip))
        judged = {why: kept for why, lacking in missing.items()
                  if (kept := state.judged(set(lacking), self.python_packages))}
        if judged:
            self.refuse(state, line, command, judged)
        self.effects(state, line, command, pip)

    def pip_needs(self, state: _State, pip: PipInstall) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for spec in pip.specs:
            name = pip_name(spec)
            package = self.k.pip_packages.get(name)
            if package is None:
                continue
            lacking = set(package.needs_first) - state.provided
            if package.needs_first_any and not package.needs_first_any & state.provided:
                lacking.add("|".join(sorted(package.needs_first_any, key=list(self.k.capabilities).index)))
            if _builds(name, spec, pip, self.k):
                lacking |= package.needs_to_build - state.provided
                why = f"building {name} from source"
            else:
                why = f"installing {name}"
            if lacking:
                out[why] = sorted(lacking)
        return out

    def effects(self, state: _State, line: int, command: SimpleCommand, pip: PipInstall | None) -> None:
        words = command.words
        base = words[0].rsplit("/", 1)[-1]
        if pip is not None:
            for spec in pip.specs:
                name = pip_name(spec)
                state.provided.add(name)
                package = self.k.pip_packages.get(name)
                if package is not None:
                    state.provided |= package.provides
            if pip.unreadable:
                state.forget((_PYTHON,), f"line {line} installs what `{' '.join(pip.unreadable)}` lists")
        elif base in ("apt-get", "apt") and "install" in words:
            recommends = not any(w in ("--no-install-recommends", "APT::Install-Recommends=false",
                                       "APT::Install-Recommends=0") for w in words)
            for w in words[words.index("install") + 1:]:
                if w.startswith("-"):
                    continue
                apt = self.k.apt_packages.get(re.split(r"[=:]", w, maxsplit=1)[0])
                if apt is not None:
                    state.provided |= apt.provides | (apt.with_recommends if recommends else frozenset())
        else:
            kinds = self.unreadable(command)
            if kinds:
                state.forget(kinds, f"line {line} runs `{_quoted(command)}`")

    @staticmethod
    def unreadable(command: SimpleCommand) -> tuple[str, ...]:
        """What a step may install that its words do not say: anything (a script, conda), system files
        (`make install`, dpkg -i) or Python packages (python setup.py, python -m X)."""
        words = command.words
        base = words[0].rsplit("/", 1)[-1]
        if base.endswith(".sh") or base in ("sh", "bash", "dash", "source", ".", "conda", "mamba", "micromamba"):
            return (_PYTHON, _SYSTEM)
        if (base == "make" and "install" in words[1:]) or (base == "dpkg" and "-i" in words[1:]):
            return (_SYSTEM,)
        if re.fullmatch(r"python(?:3(?:\.\d+)?)?", base) and len(words) > 1 and words[1] != "-c":
            return (_PYTHON,)
        return ()

    def base_state(self, reference: str | None, override: BaseImage | None) -> _State:
        if reference is None:
            why = "the base image is decided at build time (an ARG without a default)"
            return _State(set(), {_PYTHON: why, _SYSTEM: why}, "unknown")
        family = override or self.k.base(reference)
        if family is None:
            why = f"base image {reference} is not in validators/base_images.yaml"
            return _State(set(), {_PYTHON: why, _SYSTEM: why}, reference)
        unknown = ({_SYSTEM: f"{family.name} lists only part of what it carries (validators/base_images.yaml)"}
                   if family.others_unknown else {})
        return _State(set(family.provides), unknown, f"{reference}: {family.name}, {family.sources[0]}")


def build_step_problems(text: str, *, base: BaseImage | None = None,
                        knowledge: BuildKnowledge | None = None) -> list[BuildProblem]:
    """Every RUN step of the Dockerfile `text` that needs what neither its stage's base image nor an earlier step
    provides. `base`: what every external base image provides, instead of looking it up (a base built locally)."""
    judge = _Judge(knowledge or build_knowledge())
    ended: dict[str, _State] = {}
    for stage in stages(text):
        earlier = ended.get(stage.base.lower()) if stage.base else None
        state = (_State(set(earlier.provided), dict(earlier.unknown), earlier.base) if earlier is not None
                 else judge.base_state(stage.base, base))
        for ins in stage.body:
            if ins.word == "RUN":
                for command in run_commands(ins.arguments):
                    judge.step(state, ins.line, command)
        if stage.alias:
            ended[stage.alias] = state
    return judge.problems
