"""Render smoke jobs (and the user's training jobs) from templates/smoke/ into files.

`distribution_job_files(loaded_stack)` is what `infra render` writes: per distribution
jobs/NAME/{smoke-job.yml, <script>, preflight.py} and, when the distribution has its own `command`, jobs/NAME/train-job.yml,
each ready for `az ml job create -f`; a training job's `code:` is copied to code/NAME/ (what Azure ML would
upload: its .amlignore or .gitignore honoured, no link followed out of it) and named relative to the job file,
so the rendered folder can be moved or kept as a CI artifact.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.grammars import control_characters, text_problem
from infra_cli.knowledge.nccl_transport import transport_rules
from infra_cli.knowledge.skus import load_catalog
from infra_cli.conventions import EMULATED_NODE_VARIABLE
from infra_cli.build_context import context_files
from infra_cli.paths import templates_dir
from infra_cli.safe_files import OutputFile, write_beneath
from infra_cli.smoke import transport
from infra_cli.smoke.spec import (PREFLIGHT_SCRIPT, RESULT_FILE, CommandJobSpec, SmokeJob, safe_name, smoke_job,
                               training_job)
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.secret import revealed

if TYPE_CHECKING:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

SMOKE_JOB_FILE = "smoke-job.yml"
TRAINING_JOB_FILE = "train-job.yml"


# JSON's escape of a character beyond U+FFFF is a surrogate pair (\ud83d\ude80); YAML reads each half as its own
# (unpaired) character, so the pair is written as YAML's 32-bit escape (\U0001f680). An escaped backslash (\\) is
# matched first, so a literal "\u..." in the value is never taken for an escape.
_JSON_ESCAPES = re.compile(r"\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def yaml_scalar(value: object) -> str:
    """`value` as a YAML flow scalar (or flow collection) that reads back as exactly `value`: JSON, which YAML
    reads literally, with characters beyond U+FFFF as YAML's \\U escapes."""
    def pair(m: re.Match) -> str:
        if m.group(1) is None:
            return m.group(0)
        high, low = int(m.group(1), 16), int(m.group(2), 16)
        return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    return _JSON_ESCAPES.sub(pair, json.dumps(value))


@lru_cache(maxsize=2)
def _jinja(root: str) -> "SandboxedEnvironment":
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    # sandboxed: the templates see the stack's values (names, commands), which must stay data
    env = SandboxedEnvironment(loader=jinja2.FileSystemLoader(root), undefined=jinja2.StrictUndefined,
                               autoescape=False, keep_trailing_newline=True)
    env.filters["yamlstr"] = yaml_scalar  # a JSON scalar is a YAML scalar that reads back literally
    env.filters["pyrepr"] = repr  # a Python literal of the value
    env.filters["docstring"] = _docstring_text  # a name inside a docstring
    return env


def _template(name: str) -> "jinja2.Template":
    return _jinja(str(templates_dir() / "smoke")).get_template(name)


def _inlined_transport_source() -> str:
    # The script has its own `from __future__` line at its top, where Python requires it.
    text = Path(transport.__file__).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("from __future__"))


def render_smoke_script(script: str, stack: str | None = None, distribution: str | None = None) -> str:
    """The text of a smoke script (`ddp_smoke.py`, `tf_smoke.py` or the `preflight.py` both jobs run first) for
    one distribution."""
    return _template(f"{script}.j2").render(
        stack=stack, distribution=distribution, result_file=RESULT_FILE, transport_source=_inlined_transport_source(),
        nccl_rules_json=json.dumps(transport_rules().plain, sort_keys=True), emulated_node_variable=EMULATED_NODE_VARIABLE)


def render_job_yaml(spec: CommandJobSpec) -> str:
    return _template("command_job.yaml.j2").render(spec=spec)


def job_file_text(loaded: LoadedStack, distribution: str, spec: CommandJobSpec, file_name: str) -> str:
    """The job YAML as a file on disk (rendered, or uploaded with the smoke job's code): environment variables
    whose values came from ${VAR} are sensitive, so the file holds the stack's reference instead of the value,
    and a header says how to pass it. (The job submitted through the SDK carries the real value.)"""
    sensitive = loaded.source.sensitive(("distributions", distribution, "environment_variables"))
    sensitive = {k: v for k, v in sensitive.items() if k in spec.environment_variables}
    if not sensitive:
        return render_job_yaml(spec)
    shown = dataclasses.replace(spec, environment_variables={
        k: (sensitive[k] or "(sensitive value)") if k in sensitive else v for k, v in spec.environment_variables.items()})
    sets = " ".join("--set " + shlex.quote(f"environment_variables.{_one_line(k)}=") + _shell_reference(written)
                    for k, written in sensitive.items())
    header = (f"# Sensitive values (from ${{VAR}} in the stack) are not written here: environment_variables."
              f"{', environment_variables.'.join(map(_one_line, sensitive))}.\n"
              f"# Pass them when creating: az ml job create -f {file_name} {sets}\n")
    return header + render_job_yaml(shown)


_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _shell_reference(written: str) -> str:
    """The stack's text as one shell word for the header's `--set`: each `${NAME}` as "$NAME" (the shell
    expands it), everything else single-quoted (shlex.quote), so nothing in it runs when the line is pasted.
    Text with a control character (a newline would end the YAML comment) becomes "$VALUE"."""
    if control_characters(written):
        return '"$VALUE"'
    parts, at = [], 0
    for m in _REFERENCE.finditer(written):
        if m.start() > at:
            parts.append(shlex.quote(written[at:m.start()]))
        parts.append(f'"${m.group(1)}"')
        at = m.end()
    if at < len(written):
        parts.append(shlex.quote(written[at:]))
    return "".join(parts) or "''"


def _one_line(value: object) -> str:
    """Text written on a comment line: refused (never rendered) with a control character (a newline would
    end the comment and start YAML or code)."""
    text = str(value)
    problem = text_problem(text)
    if problem:
        raise DiagnosticError([Diagnostic("error", "render.refused", f"not rendered into a job file or script: "
                                          f"{problem}", hint="write it on one line, without control characters")])
    return text


def _docstring_text(value: object) -> str:
    """Text inside the smoke script's docstring as Python escapes (backslashes, quotes, control characters and
    non-ASCII escaped): it reads back as the text and can never end the docstring."""
    return str(value).encode("unicode_escape").decode("ascii").replace('"', '\\"')


def smoke_jobs(loaded: LoadedStack, names: list[str] | None = None) -> list[SmokeJob]:
    """The smoke jobs of the named distributions (default: every one whose smoke is enabled)."""
    stack = loaded.stack
    chosen = names if names else [n for n, d in stack.distributions.items() if d.smoke.enabled]
    debug_env = transport_rules().debug_env
    return [smoke_job(loaded, name, load_catalog(), debug_env) for name in chosen]


def smoke_job_files(loaded: LoadedStack, job: SmokeJob) -> list[tuple[str, str]]:
    """The smoke job's CLI v2 YAML, its script and the preflight its command runs first: (file name, text), for
    the job's code directory."""
    return [(SMOKE_JOB_FILE, job_file_text(loaded, job.name, job.spec, SMOKE_JOB_FILE)),
            (job.script, render_smoke_script(job.script, loaded.stack.stack, job.name)),
            (PREFLIGHT_SCRIPT, render_smoke_script(PREFLIGHT_SCRIPT, loaded.stack.stack, job.name))]


def write_smoke_job(loaded: LoadedStack, job: SmokeJob, directory: Path) -> list[Path]:
    """Write the job's script and CLI v2 YAML into `directory` (the job's code directory, a fresh one)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in smoke_job_files(loaded, job):
        (directory / name).write_text(text, encoding="utf-8")
        written.append(directory / name)
    return written


# What of a distribution (its keys below distributions.NAME) each job file holds: a sensitive value under one of
# them is written in clear, so `infra render` refuses it unless told (--write-secrets). One environment variable
# from ${VAR} is no such value: the file holds the stack's reference instead (job_file_text).
_SMOKE_JOB_HOLDS = (("cluster",), ("environment",), ("instance_count",), ("type",), ("process_count_per_instance",),
                    ("worker_count",), ("parameter_server_count",), ("distribution",), ("resources", "instance_count"),
                    ("environment_variables",), ("smoke", "experiment_name"), ("smoke", "timeout_minutes"))
_NOT_IN_TRAINING_JOB = ("code", "smoke", "framework", "launcher")   # code is copied, not named; the rest is infra's
# A SAS URL (Azure Storage's shared access signature, https://learn.microsoft.com/rest/api/storageservices/
# create-service-sas): its `sig` is a credential to the data, whether the stack wrote it or took it from ${VAR}.
_SAS = re.compile(r"://\S*[?&]sig=", re.IGNORECASE)


def _leaves(value: object, path: tuple) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, path + (i,))
    elif isinstance(value, str):
        yield path, value


def held_secrets(loaded: LoadedStack, name: str, *, smoke: bool) -> tuple[tuple, ...]:
    """The stack paths of the secrets distribution `name`'s smoke (or training) job file would hold in clear:
    values from a sensitive variable or ${VAR} (a map given whole as environment_variables, the command, an
    input...), and SAS URLs."""
    base = ("distributions", name)
    source = loaded.source

    def held(rest: tuple) -> bool:
        if rest[:1] == ("environment_variables",) and len(rest) == 2 and base + rest in source.interpolated:
            return False   # one variable from ${VAR}: the file holds the reference (job_file_text)
        if smoke:
            return any(rest[:len(k)] == k or k[:len(rest)] == rest for k in _SMOKE_JOB_HOLDS)
        return rest[0] not in _NOT_IN_TRAINING_JOB

    found = {tuple(p) for p in source.interpolated if tuple(p[:2]) == base and len(p) > 2 and held(tuple(p[2:]))}
    dist = loaded.stack.distributions[name].model_dump(mode="json", exclude_none=True)
    found |= {base + path for path, text in _leaves(dist, ()) if _SAS.search(text) and held(path)}
    return tuple(sorted(found, key=repr))


def _revealed(spec: CommandJobSpec) -> CommandJobSpec:
    """The spec with its sensitive values (stack/secret.py) in clear, for a job file that holds them: refused by
    `infra render`, or written 0600 when it is told to write them (--write-secrets)."""
    return dataclasses.replace(spec, **{f.name: revealed(getattr(spec, f.name)) for f in dataclasses.fields(spec)})


def _job_dirs(names: list[str]) -> dict[str, str]:
    """Each distribution's folder name (under jobs/, and code/ for its copied code): its safe name, numbered
    where names differ only in odd characters."""
    dirs: dict[str, str] = {}
    for name in names:
        base = candidate = safe_name(name)
        n = 2
        while candidate in dirs.values():
            candidate, n = f"{base}-{n}", n + 1
        dirs[name] = candidate
    return dirs


def _code_files(source: Path, folder: str) -> tuple[str, list[OutputFile]]:
    """`code:` as Azure ML uploads it, copied below `folder`: (what the job's `code:` names, the files)."""
    if source.is_file():
        return f"{folder}/{source.name}", [OutputFile(f"{folder}/{source.name}", source=source)]
    return folder, [OutputFile(f"{folder}/{f.relative}", source=f.source) for f in context_files(source).files]


def distribution_job_files(loaded_stack: LoadedStack) -> list[OutputFile]:
    """Per distribution: the smoke job YAML + script, and the user's training job YAML (with its code copied)
    when it has a command; paths relative to the output folder. A job YAML names in `secrets` the stack paths of
    the secrets it holds in clear (held_secrets), for `infra render` to refuse or write 0600."""
    files: list[OutputFile] = []
    names = list(loaded_stack.stack.distributions)
    dirs = _job_dirs(names)
    smoke_by_name = {job.name: job for job in smoke_jobs(loaded_stack)}
    copied: dict[Path, str] = {}   # a code folder two distributions share is copied once
    for name in names:
        directory = f"jobs/{dirs[name]}"
        if name in smoke_by_name:
            secrets, job = held_secrets(loaded_stack, name, smoke=True), smoke_by_name[name]
            if secrets:   # refused by render, or written 0600 under --write-secrets: in clear
                job = dataclasses.replace(job, spec=_revealed(job.spec))
            files += [OutputFile(f"{directory}/{file}", text, secrets=secrets if file == SMOKE_JOB_FILE else ())
                      for file, text in smoke_job_files(loaded_stack, job)]
        dist = loaded_stack.stack.distributions[name]
        code = None
        if dist.code and dist.command:
            source = (loaded_stack.base_dir / dist.code).resolve()
            if source not in copied:
                copied[source], code_files = _code_files(source, f"code/{dirs[name]}")
                files += code_files
            code = posixpath.relpath(copied[source], directory)
        spec = training_job(loaded_stack, name, load_catalog(), code)
        if spec is not None:
            secrets = held_secrets(loaded_stack, name, smoke=False)
            files.append(OutputFile(f"{directory}/{TRAINING_JOB_FILE}", job_file_text(
                loaded_stack, name, _revealed(spec) if secrets else spec, TRAINING_JOB_FILE), secrets=secrets))
    return files


def render_distribution_jobs(loaded_stack: LoadedStack, out_dir: Path) -> list[Path]:
    """Write distribution_job_files below `out_dir` (no link followed, safe_files.write_beneath); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = distribution_job_files(loaded_stack)
    for f in files:
        write_beneath(out, f)
    return [out / f.relative for f in files]
