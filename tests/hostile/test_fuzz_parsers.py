"""Fuzzing the parsers that read what a user (or an attacker) hands infra (issue 22, "fuzzing as the trusted
parsers do"): the stack loader, the launcher command parser, the tar/OCI image reader and the plan-file reader.

Each property is the parser's contract: any input is either read or refused with the parser's own error (a
DiagnosticError with located diagnostics, CommandSyntaxError, ImageReadError), never another exception, which
the CLI would print as "internal error (a bug in infra)". Inputs are arbitrary text/bytes and valid inputs
mutated (YAML re-dumped with values swapped, tars cut and flipped, plan files edited and resealed).

Everything runs in-process (no registry, no emulator), a few hundred examples per parser; no example database
is written (database=None). The `@example`s are the corpus: inputs that crashed a parser once, kept so they
are tried on every run whatever the random draw. INFRA_FUZZ_EXAMPLES=N runs N examples per property.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.check import check_image
from infra_cli.image.errors import ImageReadError
from infra_cli.image.layers import index_layer
from infra_cli.knowledge.launchers import launchers
from infra_cli.plan.model import Plan, Resource, ResourceChange
from infra_cli.commands.views.plan import render_plan
from infra_cli.plan.planfile import content_digest, content_hmac, read_plan_file, write_plan_file
from infra_cli.state.serial import StateSerial
from infra_cli.stack.load import parse_stack
from infra_cli.stack.model import Stack
from infra_cli.stack.launch import CommandSyntaxError, parse_command, parse_steps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_fixtures import write_blob  # noqa: E402
from test_image_hostile import layout_with, tar_header  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# INFRA_FUZZ_EXAMPLES=5000 for a longer hunt by hand; CI runs the default
FUZZ = settings(max_examples=int(os.environ.get("INFRA_FUZZ_EXAMPLES", "200")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# JSON values of every shape, as a mutation puts them where the parser expects something else
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def paths_of(doc, prefix=()):
    """Every path (tuple of keys/indices) into a JSON-like document, the root included."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths_of(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths_of(v, prefix + (i,))


@st.composite
def mutated(draw, base):
    """`base` (a JSON-like document) with a few edits: a value replaced, a key removed or added."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in paths_of(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        edit = draw(st.sampled_from(["replace", "remove", "add"]))
        if edit == "remove":
            del parent[path[-1]]
        elif edit == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(json_values)
        else:
            parent[path[-1]] = draw(json_values)
    return doc


# ---- (1) the stack loader ---------------------------------------------------------------------------------

FILE = "fuzz.yaml"
BASE_STACK_TEXT = (ROOT / "stacks" / "ib-a100.yaml").read_text(encoding="utf-8")
BASE_STACKS = [yaml.safe_load((ROOT / "stacks" / name).read_text(encoding="utf-8"))   # every launcher's shape
               for name in ("ib-a100.yaml", "mpi-deepspeed.yaml", "tf-multiworker.yaml", "lightning-per-node.yaml")]

yaml_tokens = st.sampled_from([
    "stack", "workspace", "clusters", "distributions", "environments", "a100", "size", "command", "type",
    ":", ": ", " ", "  ", "\n", "\n  ", "- ", "-", "[", "]", "{", "}", ",", "?", "&a ", "*a", "<<: ", "!!str ",
    "!!binary ", "!custom ", "'", '"', "#", "|", ">", "${X}", "${", "$X", "${{inputs.x}}", "%YAML 1.1\n", "---\n",
    "...\n", "\t", "\\", "0x1F", "1e999", "~", "null", "true", "\x00", "\ufeff", "\u2028", "é", "10:20:30",
])
yaml_ish = st.lists(yaml_tokens, max_size=60).map("".join)


def assert_loaded_or_located(text: str, environ: dict | None = None) -> None:
    try:
        stack, _ = parse_stack(text, FILE, environ if environ is not None else {"X": "x"})
    except DiagnosticError as exc:
        assert exc.diagnostics, "a refusal with nothing to say"
        for d in exc.diagnostics:
            assert d.file == FILE and d.rule and d.message, d
            assert isinstance(d.line, int) and d.line >= 1, d   # every stack diagnostic points at a line
            assert d.severity in ("error", "warning"), d
    else:
        assert isinstance(stack, Stack)


@settings(FUZZ, max_examples=2 * FUZZ.max_examples)
@given(st.text(max_size=300) | yaml_ish)
@example("stack: x\nclusters: " + "[" * 2000 + "]" * 2000)      # nesting past the composer's recursion
@example("a: &a [*a]")                                         # an alias inside its own anchor
@example("x: ${")                                              # an interpolation never closed
def test_stack_loader_reads_or_refuses_any_text(text):
    assert_loaded_or_located(text)


@FUZZ
@given(st.sampled_from(BASE_STACKS).flatmap(mutated), st.sampled_from(["block", "flow"]))
def test_stack_loader_reads_or_refuses_mutated_stacks(doc, style):
    text = yaml.safe_dump(doc, default_flow_style=style == "flow", allow_unicode=True, sort_keys=False)
    assert_loaded_or_located(text)


def test_the_unmutated_base_stack_loads():
    assert_loaded_or_located(BASE_STACK_TEXT)   # the mutations start from a stack that is read


# ---- (2) the launcher command parser ----------------------------------------------------------------------

shell_tokens = st.sampled_from([
    "python", "python3", "-m", "-c", "torchrun", "mpirun", "mpiexec", "deepspeed", "accelerate", "launch",
    "horovodrun", "bash", "sh", "-lc", "env", "exec", "A=1", "--nproc_per_node", "--nnodes", "-np", "-n", "4",
    "t.py", "train.py", "--", ";", "&&", "||", "|", "&", "(", ")", "{", "}", "'", '"', "\\", "$(", "`", "$((",
    "${X}", "$X", "${{inputs.x}}", "<", ">", "2>&1", "#", "\n", " ", "  ", "\t", "=", "--flag=", "-X",
    "99999999999999999999", "0", "-1", "1:2", "é", "\x00",
])
shell_ish = st.lists(shell_tokens, max_size=40).map(" ".join) | st.lists(shell_tokens, max_size=40).map("".join)


def assert_parsed_or_syntax_error(command: str) -> None:
    table = launchers()
    try:
        steps = parse_steps(command, table)
        parse_command(command, table)
    except CommandSyntaxError as exc:
        assert str(exc)
    else:
        assert isinstance(steps, list)


@settings(FUZZ, max_examples=2 * FUZZ.max_examples)
@given(st.text(max_size=300) | shell_ish)
@example("bash -c " * 50 + "torchrun t.py")                     # nesting past the depth bound
@example("python t.py --name 'x")                              # an unclosed quote
@example("mpirun -np 99999999999999999999999 python t.py")     # a count no int32 holds
def test_command_parser_reads_or_refuses_any_text(command):
    assert_parsed_or_syntax_error(command)


# ---- (3) the tar / OCI image reader -----------------------------------------------------------------------

def valid_tar(members: list[tuple[str, str, bytes]], fmt: int) -> bytes:
    """A tar written by Python's tarfile: (name, kind, data) members, kind file|dir|symlink|hardlink."""
    out = io.BytesIO()
    try:
        _write_tar(out, members, fmt)
    except ValueError:     # a name or link too long for ustar: PAX holds any
        return valid_tar(members, tarfile.PAX_FORMAT)
    return out.getvalue()


def _write_tar(out: io.BytesIO, members: list[tuple[str, str, bytes]], fmt: int) -> None:
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("symlink", "hardlink"):
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = data.decode("utf-8", "replace") or "x"
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if kind == "file" else None)


member_names = st.one_of(
    st.sampled_from(["usr/bin/mpirun", "usr/lib/libmpi.so.40", "usr/lib/libopen-pal.so.40", "etc/os-release",
                     "usr/bin/.wh.mpirun", "usr/.wh..wh..opq", "./a", "../../x", "/abs", "a//b", "a/./b/.."]),
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1,
                                                 max_size=120))
tar_members = st.lists(st.tuples(member_names, st.sampled_from(["file", "file", "dir", "symlink", "hardlink"]),
                                 st.binary(max_size=700)), max_size=6)
tars = st.builds(valid_tar, tar_members, st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                                          tarfile.PAX_FORMAT]))


@st.composite
def damaged(draw, blobs):
    """A valid blob cut short and/or with bytes flipped (header fields, checksums, sizes, PAX records)."""
    data = bytearray(draw(blobs))
    if data and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
    if data and draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


layer_bytes = st.one_of(st.binary(max_size=2048), tars, damaged(tars),
                        st.builds(lambda b: tar_header(b"f", 10**12) + b, st.binary(max_size=64)))


@FUZZ
@given(layer_bytes, st.integers(1, 600))
@example(valid_tar([("usr/bin/mpirun", "file", b"x" * 600)], tarfile.USTAR_FORMAT)[:700], 512)  # cut in a header
@example(tar_header(b"f", 10**12) + b"x", 1)                                          # a size no stream holds
@example(tar_header(b"usr/bin/mpirun", 0, b"1") + b"\0" * 1024, 100)                  # a hard link to nowhere
def test_layer_walker_indexes_or_refuses_any_tar_stream(data, chunk):
    """The walker on an uncompressed stream in chunks of any size: an index or ImageReadError."""
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    try:
        index_layer(iter(chunks), 0, "sha256:" + "0" * 64, lambda path: () if path.endswith("mpirun") else None,
                    "layer 1 of 1")
    except ImageReadError as exc:
        assert exc.diagnostics[0].rule.startswith("image.") and exc.message


def assert_checked_or_refused(reference: str) -> None:
    try:
        result = check_image(reference, timeout=None)
    except ImageReadError as exc:
        assert exc.message and exc.diagnostics[0].rule.startswith("image.")
    else:
        assert result.requirements


@FUZZ
@given(st.lists(layer_bytes, min_size=1, max_size=2), st.booleans())
def test_image_check_reads_or_refuses_any_layer(layers, compress):
    """A whole OCI layout whose layers are any bytes (gzip-compressed or not): a verdict or ImageReadError."""
    with tempfile.TemporaryDirectory() as tmp:
        ref = layout_with(Path(tmp), [gzip.compress(b) if compress else b for b in layers])
        assert_checked_or_refused(ref)


# An OCI layout's documents as JSON with placeholders for what is known once the blobs are written
BASE_CONFIG = {"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin", "LD_LIBRARY_PATH=/x"]},
               "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]}}
BASE_MANIFEST = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "@config", "size": "@config-size"},
                 "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "@layer", "size": "@layer-size"}]}
BASE_INDEX = {"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@manifest", "size": "@manifest-size",
     "platform": {"architecture": "amd64", "os": "linux"}, "annotations": {"org.opencontainers.image.ref.name": "t"}}]}


def filled(doc, values: dict):
    """`doc` with each placeholder string replaced by its value."""
    if isinstance(doc, dict):
        return {k: filled(v, values) for k, v in doc.items()}
    if isinstance(doc, list):
        return [filled(v, values) for v in doc]
    return values.get(doc, doc) if isinstance(doc, str) else doc


@FUZZ
@given(tars, mutated(BASE_CONFIG) | st.just(BASE_CONFIG), mutated(BASE_MANIFEST) | st.just(BASE_MANIFEST),
       mutated(BASE_INDEX) | st.just(BASE_INDEX))
def test_image_check_reads_or_refuses_edited_layout_documents(layer, config, manifest, index):
    """index.json, the manifest and the config edited (the blobs' digests still match): a verdict or ImageReadError."""
    with tempfile.TemporaryDirectory() as tmp:
        layout = Path(tmp)
        (layout / "blobs" / "sha256").mkdir(parents=True)
        (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        values = {}
        for name, blob in (("layer", gzip.compress(layer)), ("config", config)):
            values["@" + name], values[f"@{name}-size"] = write_blob(layout, blob)
        values["@manifest"], values["@manifest-size"] = write_blob(layout, filled(manifest, values))
        (layout / "index.json").write_text(json.dumps(filled(index, values)))
        assert_checked_or_refused(f"oci:{layout}:t")


def docker_archive(layer: bytes, manifest: object) -> bytes:
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/usr/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    return valid_tar([("config.json", "file", config), ("layer/layer.tar", "file", layer),
                      ("manifest.json", "file", json.dumps(manifest).encode())], tarfile.USTAR_FORMAT)


archive_manifest = st.one_of(
    st.just([{"Config": "config.json", "RepoTags": ["x:1"], "Layers": ["layer/layer.tar"]}]),
    mutated([{"Config": "config.json", "RepoTags": ["x:1"], "Layers": ["layer/layer.tar"]}]))
archives = st.builds(docker_archive, tars, archive_manifest)


@FUZZ
@given(st.one_of(st.binary(max_size=2048), archives, damaged(archives)))
def test_image_check_reads_or_refuses_any_docker_archive(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "image.tar"
        path.write_bytes(data)
        assert_checked_or_refused(f"docker-archive:{path}")


# ---- (4) the plan-file reader -----------------------------------------------------------------------------

KEY = b"fuzz-key"


def valid_plan_body() -> dict:
    cluster = {"size": "standard_nd96asr_v4", "max_instances": 3, "tags": {"team": "ml"}}
    plan = Plan(
        stack="s", mode="normal",
        resource_changes=[
            ResourceChange("cluster.a100", "cluster", "a100", ["update"], {**cluster, "max_instances": 2}, cluster,
                           [["size"]], "because", (("tags", "team"),)),
            ResourceChange("cluster.old", "cluster", "old", ["delete"], cluster, None),
        ],
        smoke_jobs=["smoke.ddp"], diagnostics=[Diagnostic("warning", "r", "m")],
        live_fingerprint="abc", desired=[Resource("cluster.a100", "cluster", "a100", cluster, {"infra.stack": "s"},
                                                  ("environment.e",))],
        smoke_reasons={"smoke.ddp": "new"},
        workspace={"cloud": "AzureCloud", "subscription_id": "00000000-0000-0000-0000-000000000001",
                   "resource_group": "rg", "name": "ws"}, state=StateSerial("a-lineage", 2))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.plan"
        write_plan_file(path, plan, Path("stack.yaml"), ["cluster.a100"])
        return json.loads(path.read_text())


BASE_PLAN = valid_plan_body()


def reseal(body: object, key: bytes | None) -> object:
    """Recompute the seals, as an attacker who knows the format does (only the HMAC key is out of reach)."""
    if isinstance(body, dict):
        body["digest"] = content_digest(body)
        if key is not None:
            body["hmac"] = content_hmac(body, key)
    return body


def assert_read_or_refused(raw: bytes, key: bytes | None = None, strict: bool = True) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.plan"
        path.write_bytes(raw)
        try:
            saved = read_plan_file(path, key=key, strict=strict)
        except DiagnosticError as exc:
            for d in exc.diagnostics:
                assert d.file == str(path) and d.rule.startswith("planfile.") and d.message, d
        else:   # what was read, `infra show` prints
            plan = saved.plan
            render_plan(plan, colour=False)
            json.dumps(plan.to_json())
            plan.counts()
            for d in plan.diagnostics:
                d.location()


@FUZZ
@given(st.binary(max_size=400) | json_values.map(lambda v: json.dumps(v).encode()))
def test_plan_reader_reads_or_refuses_any_bytes(raw):
    assert_read_or_refused(raw)


def edited(*edits: tuple) -> dict:
    """BASE_PLAN with (path..., value) edits applied."""
    body = copy.deepcopy(BASE_PLAN)
    for *path, value in edits:
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    return body


CHANGE, DELETED = ("resource_changes", 0), ("resource_changes", 1)


@FUZZ
@given(mutated(BASE_PLAN), st.sampled_from([None, KEY]), st.booleans())
# the corpus: resealed edits `infra show` (and apply's reading of them) crashed on, "internal error" before
@example(edited((*CHANGE, "change", "after", "max_instances", [])), None, False)   # int([]) in the cost
@example(edited((*CHANGE, "change", "after", True)), None, False)                  # True.get in the cost
@example(edited((*CHANGE, "change", "before", [])), None, False)                   # [].items masking it
@example(edited((*DELETED, "action_reason", [])), None, False)                     # unhashable reason
@example(edited((*DELETED, "action_reason", True)), None, False)                   # True.format
@example(edited((*DELETED, "action_reason", "{0}")), None, False)                  # IndexError in .format
@example(edited(("desired", 0, "attributes", [])), None, True)
@example(edited(("diagnostics", 0, "line", "x")), None, False)
@example(edited(("smoke_reasons", "smoke.ddp", 3)), KEY, True)
def test_plan_reader_reads_or_refuses_edited_and_resealed_plans(body, key, strict):
    """Edits that keep a valid seal reach every field the reader builds a Plan from; what it reads, show prints."""
    assert_read_or_refused(json.dumps(reseal(body, key)).encode(), key, strict)


@FUZZ
@given(damaged(st.just(json.dumps(BASE_PLAN).encode())))
def test_plan_reader_reads_or_refuses_damaged_bytes(raw):
    assert_read_or_refused(raw)


def test_the_unmutated_base_plan_is_read():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.plan"
        path.write_text(json.dumps(BASE_PLAN))
        assert read_plan_file(path, key=None).plan.resource_changes[0].address == "cluster.a100"
