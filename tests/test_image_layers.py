"""The layer walker and merged view on hand-written tars (tar formats, links, whiteouts), no registry."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

import pytest
import zstandard

from infra_cli.image.blob import VerifyingReader, decompressed_chunks
from infra_cli.image.errors import ImageReadError
from infra_cli.image.evidence import build_matcher
from infra_cli.knowledge.image_evidence import glob_regex, profiles
from infra_cli.image.layers import index_layer
from infra_cli.image.merged_filesystem import MergedView, State
import re

MATCHER = build_matcher(profiles().values())


def tar_bytes(entries, fmt=tarfile.PAX_FORMAT) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for kind, name, payload in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind]
                info.linkname = payload or ""
                tar.addfile(info)
    return out.getvalue()


def index(data: bytes, position: int = 0):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    reader = VerifyingReader(io.BytesIO(data), digest, len(data), "layer")
    kind, chunks = decompressed_chunks(reader)
    idx = index_layer(chunks, position, digest, MATCHER, "layer")
    reader.finish()
    idx.compression = kind
    return idx


def test_long_names_gnu_and_pax_and_hardlink_content():
    deep = "usr/lib/" + "/".join(["d" * 40] * 4) + "/libmpi.so.40.30.4"
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        idx = index(tar_bytes([("file", deep, b"\0v4.1.5\0"), ("hard", "usr/lib/libmpi.so.40.30.9", deep)], fmt))
        assert idx.candidates["/" + deep].captures and "4.1.5" in idx.candidates["/" + deep].captures.values()
        linked = idx.candidates["/usr/lib/libmpi.so.40.30.9"]
        assert linked.kind == "hardlink" and linked.captures == idx.candidates["/" + deep].captures


@pytest.mark.parametrize("compress", [gzip.compress, zstandard.ZstdCompressor().compress, lambda b: b])
def test_compression_sniffed_by_magic(compress):
    raw = tar_bytes([("file", "usr/bin/ofed_info", b"echo MLNX_OFED_LINUX-5.8-1.0.1.1:\n")])
    idx = index(compress(raw))
    assert idx.candidates["/usr/bin/ofed_info"].captures
    assert idx.compression == {gzip.compress: "gzip"}.get(compress, idx.compression)


def test_multi_member_gzip():
    a = tar_bytes([("file", "a/x", b"1")]).rstrip(b"\0")    # first member without the end-of-archive blocks
    a += b"\0" * (-len(a) % 512)
    b = tar_bytes([("file", "usr/bin/ofed_info", b"MLNX_OFED_LINUX-23.10-1.1.9.0")])
    idx = index(gzip.compress(a) + gzip.compress(b))
    assert "/usr/bin/ofed_info" in idx.candidates and idx.entries == 2


def test_truncated_and_corrupt_layers_raise_read_errors():
    raw = gzip.compress(tar_bytes([("file", "usr/lib/libmpi.so.40.30.4", b"x" * 100_000)]))
    with pytest.raises(ImageReadError, match="does not match its digest|ends in the middle"):
        index_truncated = raw[: len(raw) // 2]
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        reader = VerifyingReader(io.BytesIO(index_truncated), digest, len(raw), "layer")
        kind, chunks = decompressed_chunks(reader)
        try:
            index_layer(chunks, 0, digest, MATCHER, "layer")
        finally:
            reader.finish()


def test_merged_view_whiteouts_opaque_and_own_entries():
    lower = index(tar_bytes([("file", "usr/lib/libmpi.so.40.30.4", b""), ("file", "opt/a/keep", b""),
                             ("sym", "usr/bin/mpirun", "orterun"), ("file", "usr/bin/orterun", b"")]), 0)
    upper = index(tar_bytes([("file", "usr/lib/.wh.libmpi.so.40.30.4", b""), ("file", "opt/a/.wh..wh..opq", b""),
                             ("file", "opt/a/new", b""), ("file", "usr/bin/.wh.orterun", b""),
                             ("file", "usr/bin/orterun", b"")]), 1)
    view = MergedView([upper, lower], complete=True)
    assert view.entry("/usr/lib/libmpi.so.40.30.4").state is State.ABSENT
    assert view.entry("/opt/a/keep").state is State.ABSENT and view.entry("/opt/a/new").state is State.FOUND
    hit, chain = view.resolve("/usr/bin/mpirun")       # re-added in the same layer as its whiteout
    assert hit.state is State.FOUND and hit.layer is upper and chain == ["/usr/bin/mpirun", "/usr/bin/orterun"]
    partial = MergedView([upper], complete=False)
    assert partial.entry("/usr/lib/other.so").state is State.UNKNOWN
    assert partial.entry("/opt/a/keep").state is State.ABSENT      # an opaque dir decides without lower layers


def test_symlink_loops_end():
    idx = index(tar_bytes([("sym", "usr/bin/mpirun", "a"), ("sym", "usr/bin/a", "mpirun")]))
    hit, _ = MergedView([idx], complete=True).resolve("/usr/bin/mpirun")
    assert hit.state is State.ABSENT


def test_glob_regex():
    rx = re.compile("^" + glob_regex("**/libmpi.so.40*") + "$")
    assert rx.match("/usr/lib/libmpi.so.40.30.4") and rx.match("/libmpi.so.40")
    assert not rx.match("/usr/lib/libmpi.so.12") and not rx.match("/usr/lib/xlibmpi.so.40")
    fixed = re.compile("^" + glob_regex("/usr/bin/ofed_info") + "$")
    assert fixed.match("/usr/bin/ofed_info") and not fixed.match("/usr/local/bin/ofed_info")
    with pytest.raises(ValueError):
        glob_regex("relative/*")


def test_strict_pax_reading_keeps_what_real_writers_write():
    """The strict PAX reader (tests/hostile/test_image_hostile.py has what it refuses) still reads what tar
    writers emit: a value holding '=' and a newline, several records, UTF-8 names, a long link target, the
    size record, NUL padding after the records; and ancestors of a deep path are directories once, whatever
    the order of entries."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("usr/lib/" + "ü" * 120 + "/libmpi.so.40.30.4")
        info.pax_headers = {"comment": "a=b\nc", "mtime": "1700000000.25"}
        data = b"\0v4.1.6\0"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("usr/bin/mpirun")
        link.type, link.linkname = tarfile.SYMTYPE, "/opt/" + "x" * 200 + "/orterun"
        tar.addfile(link)
        tar.addfile(tarfile.TarInfo("a/b/c/d/e/f"))
        d = tarfile.TarInfo("a/b/c")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
    idx = index(out.getvalue())
    name = "/usr/lib/" + "ü" * 120 + "/libmpi.so.40.30.4"
    assert "4.1.6" in idx.candidates[name].captures.values()
    assert idx.symlinks["/usr/bin/mpirun"] == "/opt/" + "x" * 200 + "/orterun"
    assert {hash(p) for p in ("/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/b/c/d/e")} <= idx.dirs
    assert hash("/a/b/c/d/e/f") in idx.files and idx.entries == 4


@pytest.mark.parametrize("records, why", [
    (b"10 path=x\n\0\0\0", "/x"),                     # NUL padding after the last record: read
    (b"10 path=x\n11 path=yy\n", "/yy"),              # a later record wins, as in tar
    (b"10 path=x\nzz", "does not start with its length"),
])
def test_pax_records_are_read_by_their_lengths(records, why):
    def block(name: bytes, size: int, flag: bytes) -> bytes:
        h = bytearray(512)
        h[0:len(name)], h[124:136], h[156:157] = name, b"%011o\0" % size, flag
        return bytes(h)

    layer = (block(b"pax", len(records), b"x") + records + b"\0" * (-len(records) % 512)
             + block(b"f", 0, b"0") + b"\0" * 1024)
    if why.startswith("/"):
        idx = index(layer)
        assert idx.entries == 1 and hash(why) in idx.files
    else:
        with pytest.raises(ImageReadError, match=why):
            index(layer)
