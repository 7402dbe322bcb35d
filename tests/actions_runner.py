"""A job of a GitHub Actions workflow run the way the runner runs it, for the composite action of this repository
(action.yml) and the example workflows that use it (docs/examples/workflows/): each step's `if:` evaluated (with the
implicit `success()`), `${{ }}` expressions expanded into env and run text, step outputs read from GITHUB_OUTPUT,
the action's outputs evaluated from its steps', the job summary appended to GITHUB_STEP_SUMMARY, and a failed step
failing the job and skipping the steps that do not ask for `always()`/`failure()`.

Expressions are the subset these files use (https://docs.github.com/actions/learn-github-actions/expressions):
contexts (`inputs`, `steps.ID.outputs`, `github`, `vars`, `env`), string, number and boolean literals, `==` and
`!=` (strings compared ignoring case), `!`, `&&` and `||` (returning an operand, as GitHub's do), parentheses, and
`always()`, `success()`, `failure()`. Steps that `uses:` another action (checkout, setup-python, azure/login,
upload-artifact) are recorded as skipped: the test's folder is the checkout, its venv the job's Python, and the
local Azure stands in for the signed-in one.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_*][A-Za-z0-9_\-]*)*))")


class Expression:
    def __init__(self, text: str, context: dict[str, Any], status: str):
        self.tokens = self._tokens(text)
        self.context, self.status, self.i = context, status, 0

    @staticmethod
    def _tokens(text: str) -> list[tuple[str, str]]:
        out, at = [], 0
        while at < len(text):
            m = _TOKEN.match(text, at)
            if not m or m.end() == at:
                if text[at:].strip() == "":
                    break
                raise ValueError(f"cannot read expression at {text[at:]!r}")
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
            at = m.end()
        return out

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        self.i += 1
        return self.tokens[self.i - 1]

    def value(self) -> Any:
        out = self.or_()
        assert self.peek() is None, self.tokens[self.i:]
        return out

    def or_(self) -> Any:
        left = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            left = left if truthy(left) else right
        return left

    def and_(self) -> Any:
        left = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.compare()
            left = right if truthy(left) else left
        return left

    def compare(self) -> Any:
        left = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.unary()
            same = _normal(left) == _normal(right)
            left = same if op == "==" else not same
        return left

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if (kind, text) == ("op", "("):
            out = self.or_()
            assert self.take() == ("op", ")")
            return out
        assert kind == "name", (kind, text)
        if self.peek() == ("op", "("):
            self.take()
            assert self.take() == ("op", ")"), "only functions without arguments"
            return {"always": True, "success": self.status == "success",
                    "failure": self.status == "failure"}[text]
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        return self.context.get(text, "")


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value) if value.strip() else value
        except ValueError:
            return value.lower()
    if isinstance(value, bool):
        return float(value)
    return value


def truthy(value: Any) -> bool:
    return bool(value) and value != 0


def evaluate(text: str, context: dict[str, Any], status: str = "success") -> Any:
    return Expression(text, context, status).value()


def expand(text: str, context: dict[str, Any]) -> str:
    def one(m: re.Match) -> str:
        value = evaluate(m.group(1), context)
        return "" if value is None else ("true" if value is True else "false" if value is False else
                                         str(int(value)) if isinstance(value, float) and value.is_integer() else
                                         str(value))
    return EXPRESSION.sub(one, text)


def condition(step: dict, context: dict[str, Any], status: str) -> bool:
    text = str(step.get("if", "")).strip()
    if not text:
        return status == "success"
    inner = EXPRESSION.fullmatch(text)
    text = inner.group(1) if inner else text
    if not re.search(r"\b(always|success|failure|cancelled)\(\)", text):   # GitHub's implicit success() &&
        text = f"success() && ({text})"
    return truthy(evaluate(text, context, status))


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's NAME=VALUE lines (and NAME<<DELIMITER blocks)."""
    out: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            out[name] = "\n".join(lines[i + 1:end])
            i = end + 1
            continue
        name, _, value = line.partition("=")
        out[name] = value
        i += 1
    return out


@dataclass
class StepRun:
    name: str
    ran: bool
    returncode: int = 0
    log: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    """One job's run: the steps run or skipped, the summary, and whether it succeeded."""
    steps: list[StepRun] = field(default_factory=list)
    status: str = "success"
    summary: str = ""

    def step(self, name: str) -> StepRun:
        return next(s for s in self.steps if s.name == name)

    @property
    def log(self) -> str:
        return "\n".join(s.log for s in self.steps)


class Runner:
    """Runs steps with the job's PATH (a venv's python3 and infra first), in `workspace` (the checkout)."""

    def __init__(self, action: dict, action_path: Path, venv: Path, workspace: Path, base_path: str,
                 job_env: dict[str, str] | None = None, github: dict[str, str] | None = None):
        self.action, self.action_path, self.workspace = action, action_path, workspace
        self.path = f"{venv / 'bin'}{os.pathsep}{base_path}"
        self.job_env = dict(job_env or {})
        self.github = {"github.action_path": str(action_path), "github.workspace": str(workspace),
                       "github.token": "test-token", **(github or {})}
        self.summary = workspace.parent / f"{workspace.name}-summary.md"

    def _shell(self, run: str, env: dict[str, str], output: Path) -> subprocess.CompletedProcess:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("INFRA_", "PYTHON", "VIRTUAL_ENV", "GITHUB_"))}
        base.update(self.job_env)
        base.update(env, PATH=self.path, GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(self.summary),
                    GITHUB_WORKSPACE=str(self.workspace))
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", run], cwd=self.workspace,
                              env=base, capture_output=True, text=True, timeout=600)

    def run_action(self, given: dict[str, str], job: Job) -> tuple[str, dict[str, str]]:
        """action.yml's composite steps with `given` inputs; the action's status and outputs."""
        inputs = {name: str(spec.get("default", "")) for name, spec in self.action["inputs"].items()}
        unknown = set(given) - set(inputs)
        assert not unknown, f"not inputs of the action: {unknown}"
        inputs.update({k: str(v) for k, v in given.items()})
        context: dict[str, Any] = {f"inputs.{k}": v for k, v in inputs.items()} | self.github
        status = "success"
        for index, step in enumerate(self.action["runs"]["steps"]):
            name = step.get("name", f"action step {index}")
            if not condition(step, context, status):
                job.steps.append(StepRun(f"action: {name}", False))
                continue
            output = self.workspace.parent / f"output-{len(job.steps)}"
            env = {k: expand(str(v), context) for k, v in (step.get("env") or {}).items()}
            done = self._shell(expand(step["run"], context), env, output)
            outputs = read_outputs(output)
            if step.get("id"):
                context.update({f"steps.{step['id']}.outputs.{k}": v for k, v in outputs.items()})
            job.steps.append(StepRun(f"action: {name}", True, done.returncode, done.stdout + done.stderr, outputs))
            if done.returncode != 0:
                status = "failure"
        outputs = {name: expand(str(spec["value"]), context) for name, spec in self.action.get("outputs", {}).items()}
        return status, outputs

    def run_job(self, job_spec: dict, *, action_uses: str, overrides: dict[str, str] | None = None) -> Job:
        """The job's steps: ours (`uses: action_uses`) through run_action, `run:` steps in bash, other actions
        recorded as skipped."""
        job = Job()
        context: dict[str, Any] = dict(self.github)
        for index, step in enumerate(job_spec["steps"]):
            name = step.get("name") or step.get("uses") or f"step {index}"
            if not condition(step, context, job.status):
                job.steps.append(StepRun(name, False))
                continue
            uses = step.get("uses", "")
            if uses == action_uses:
                given = {k: expand(str(v), context) for k, v in (step.get("with") or {}).items()}
                status, outputs = self.run_action({**given, **(overrides or {})}, job)
                job.steps.append(StepRun(name, True, 0 if status == "success" else 1, "", outputs))
            elif uses:
                job.steps.append(StepRun(name, False, log="(another action: not run here)"))
                continue
            else:
                output = self.workspace.parent / f"output-{len(job.steps)}"
                env = {k: expand(str(v), context) for k, v in (step.get("env") or {}).items()}
                done = self._shell(expand(step["run"], context), env, output)
                outputs = read_outputs(output)
                job.steps.append(StepRun(name, True, done.returncode, done.stdout + done.stderr, outputs))
                status = "success" if done.returncode == 0 else "failure"
            if step.get("id"):
                context.update({f"steps.{step['id']}.outputs.{k}": v for k, v in job.steps[-1].outputs.items()})
                context[f"steps.{step['id']}.outcome"] = "success" if job.steps[-1].returncode == 0 else "failure"
            if job.steps[-1].returncode != 0:
                job.status = "failure"
        job.summary = self.summary.read_text() if self.summary.exists() else ""
        return job
