"""Fuzzing the readers of the files a stack names (issue 31): Dockerfiles and conda files, beside the stack loader
and the other parsers of test_fuzz_parsers.py, with the same contract: any input is read or refused with a
located diagnostic, never another exception (the CLI would print "internal error (a bug in infra)").

- The Dockerfile's shell words are shlex.split's, read in linear time: the two agree on any text.
- read_dockerfile takes any text; validate of a stack whose build context holds it gives a verdict.
- A conda file is any text: read under the stack loader's bounds or refused with diagnostics in its own file.

In-process, a few hundred examples each, no example database (database=None); INFRA_FUZZ_EXAMPLES=N runs more.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.validate.dockerfile import DockerfileFacts, read_dockerfile, shell_words
from infra_cli.validate.engine import validate_stack
from infra_cli.validate.rules.carries import conda_document

FUZZ = settings(max_examples=int(os.environ.get("INFRA_FUZZ_EXAMPLES", "200")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# Text made of what shells and Dockerfiles treat specially, so the draws hit quotes, escapes and continuations.
shell_ish = st.lists(st.sampled_from(list(" \t\r\n'\"\\$#&;|-=[]{}:,x") + ["pip", "install", "&&", "\u2028",
                                                                                "\x00", "\x85"]),
                     max_size=60).map("".join)
INSTRUCTIONS = ["FROM", "ARG", "RUN", "COPY", "ADD", "ENV", "from", "# c", "", "\\"]
dockerfile_lines = st.lists(
    st.tuples(st.sampled_from(INSTRUCTIONS), shell_ish).map(lambda t: f"{t[0]} {t[1]}"), max_size=12,
).map("\n".join)

# YAML made of what conda files hold, and of what attacks them: anchors, aliases, tags, merge keys, flow.
yaml_pieces = ["name: x\n", "dependencies:\n", "  - python=3.10\n", "  - pip:\n", "    - torch\n", "&a ", "*a",
               "[", "]", "{", "}", ": ", "- ", "<<: ", "!!python/name:os.system ", "!!binary ", "${X}", "\t", "'",
               '"', "\n", "  ", "\x00", "\u2028", "? ", "---\n", "...\n", "%YAML 1.1\n"]
yaml_ish = st.lists(st.sampled_from(yaml_pieces), max_size=40).map("".join)


@FUZZ
@given(shell_ish | st.text(max_size=80))
@example('a "b\\"c" \'d\\\' e\\')
@example("x\\\n y")
def test_shell_words_are_shlex_words(text):
    try:
        expected = shlex.split(text)
    except ValueError:
        expected = None
    try:
        got = shell_words(text)
    except ValueError:
        got = None
    assert got == expected


@FUZZ
@given(dockerfile_lines | st.text(max_size=300))
@example("FROM a AS b\nFROM b AS a\nFROM a\n")          # stages named after each other
@example("COPY --chown=1 --from=x [\"a\"\n")              # an exec form never closed
@example("RUN pip install pip install pip install\n")    # installs with nothing to install
def test_read_dockerfile_takes_any_text(text):
    facts = read_dockerfile(text)
    assert isinstance(facts, DockerfileFacts)
    assert all(isinstance(p, str) for p in facts.copied + facts.pip_installs)


def _verdict(root: Path, stack: str) -> list[Diagnostic]:
    (root / "stack.yaml").write_text(stack)
    try:
        return validate_stack(load_stack(root / "stack.yaml"))
    except DiagnosticError as exc:
        return exc.diagnostics


STACK = """stack: fuzz
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-training, location: eastus}
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  env: ENV
distributions:
  job: {cluster: gpu, environment: env, type: mpi, process_count_per_instance: 8, instance_count: 2}
"""


@FUZZ
@given(dockerfile_lines, yaml_ish)
@example("FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\nCOPY conda.yml /tmp/\n", "a: &a [*a]\n")
@example("FROM \nCOPY \x00\\", "")   # found by this test: a NUL in a COPY source was "ValueError: embedded null byte"
def test_validate_gives_a_verdict_for_any_dockerfile_and_the_conda_file_it_copies(dockerfile, conda):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ctx").mkdir()
        (root / "ctx" / "Dockerfile").write_text(dockerfile + "\nCOPY conda.yml requirements.txt /tmp/\n")
        (root / "ctx" / "conda.yml").write_text(conda)
        (root / "ctx" / "requirements.txt").write_text(conda)
        for d in _verdict(root, STACK.replace("ENV", "{build: {path: ctx}}")):
            assert isinstance(d, Diagnostic) and d.rule and d.message


@FUZZ
@given(yaml_ish | st.text(max_size=300))
@example("a: &a [*a]\n")                                      # an alias inside its own anchor
@example("dependencies: " + "[" * 200 + "]" * 200)           # nesting past the loader's depth
@example("dependencies: [*x]\n")                             # an alias never anchored
def test_a_conda_file_is_read_or_refused_with_located_diagnostics(conda):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "conda.yml").write_bytes(conda.encode("utf-8", "surrogatepass"))
        data, refused = conda_document(root / "conda.yml", root)
        assert data is None or not refused
        for d in refused:
            assert d.file == str(root / "conda.yml") and d.line is not None and d.message
        verdict = _verdict(root, STACK.replace(
            "ENV", "{image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04, conda_file: conda.yml}"))
        assert all(d.file == str(root / "stack.yaml") for d in verdict if d.rule == "environment.conda-file")
