"""One layer's tar stream -> a compact `LayerIndex`, walking 512-byte headers without tarfile.

What is kept per layer is what the merged view and the evidence rules need, never file data: hashes of
every path (existence and shadowing), whiteouts and opaque directories, link targets, and for the few
entries the evidence rules name, the versions their regexes found. Memory is bounded by the number of
entries, not by the layer's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

from infra_cli.image.errors import ImageReadError

WHITEOUT, OPAQUE = ".wh.", ".wh..wh..opq"
BLOCK = 512
# tar type flags
_REG, _AREG, _LNK, _SYM, _DIR = b"0", b"\0", b"1", b"2", b"5"
_GNU_LONGNAME, _GNU_LONGLINK, _PAX, _PAX_GLOBAL = b"L", b"K", b"x", b"g"


class Extractor(Protocol):
    id: str
    pattern: "re.Pattern[bytes]"
    max_bytes: int


# Given a normalised path, the extractors to run on its content (empty: keep as a candidate, read nothing),
# or None when no evidence rule names it.
Matcher = Callable[[str], "tuple[Extractor, ...] | None"]


@dataclass
class Candidate:
    path: str
    kind: str                    # file | symlink | hardlink | other
    size: int
    link: str | None = None      # symlink/hardlink target as written in the tar
    captures: dict[str, str] = field(default_factory=dict)   # extractor id -> version text found


@dataclass
class LayerIndex:
    position: int                # 0 = bottom layer
    digest: str
    compression: str = "none"
    compressed_bytes: int = 0
    entries: int = 0
    files: set = field(default_factory=set)       # hash(path) of every non-directory entry
    dirs: set = field(default_factory=set)        # hash(path) of directories (explicit or implied by a child)
    whiteouts: set = field(default_factory=set)   # paths this layer deletes from lower layers
    opaque: set = field(default_factory=set)      # directories whose lower-layer children this layer hides
    symlinks: dict = field(default_factory=dict)  # path -> target
    hardlinks: dict = field(default_factory=dict) # path -> normalised target path
    candidates: dict = field(default_factory=dict)  # path -> Candidate


def normalise(name: str) -> str:
    """'./usr/bin/' -> '/usr/bin'; tar names are relative to the image root."""
    if name.startswith("./"):
        name = name[2:]
    name = name.strip("/")
    return "/" + name if name and name != "." else "/"


def _octal(field_: bytes) -> int:
    if field_[:1] and field_[0] & 0x80:          # GNU base-256 for sizes over 8 GiB
        value = int.from_bytes(field_, "big") & ~(0x80 << (8 * (len(field_) - 1)))
        return value
    text = field_.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _cstr(field_: bytes) -> str:
    return field_.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes) -> dict[str, str]:
    out, pos = {}, 0
    while pos < len(data):
        space = data.index(b" ", pos)
        length = int(data[pos:space])
        key, _, value = data[space + 1: pos + length - 1].partition(b"=")
        out[key.decode()] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


class _Buffer:
    """The uncompressed stream as a sliding window over decompressed chunks."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks, self.buf, self.pos = chunks, b"", 0

    def _more(self) -> bool:
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        self.buf = self.buf[self.pos:] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0
        return True

    def take(self, n: int) -> bytes | None:
        while len(self.buf) - self.pos < n:
            if not self._more():
                return None
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def skip(self, n: int) -> bool:
        while len(self.buf) - self.pos < n:
            n -= len(self.buf) - self.pos
            self.buf, self.pos = b"", 0
            if not self._more():
                return False
        self.pos += n
        return True

    def read_prefix(self, n: int, keep: int) -> bytes | None:
        """Read an entry's n data bytes, returning only the first `keep` of them."""
        if n <= keep:
            return self.take(n)
        head = self.take(keep)
        return head if head is not None and self.skip(n - keep) else None


def _padded(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK * BLOCK


def index_layer(chunks: Iterator[bytes], position: int, digest: str, matcher: Matcher, what: str) -> LayerIndex:
    """Walk a layer's uncompressed tar stream once and index it (see module docstring)."""
    index = LayerIndex(position, digest)
    files, dirs, symlinks, hardlinks, candidates = (index.files, index.dirs, index.symlinks,
                                                    index.hardlinks, index.candidates)
    buf = _Buffer(chunks)
    long_name = long_link = None
    pax: dict[str, str] = {}
    last_parent = None

    def truncated() -> ImageReadError:
        return ImageReadError(f"{what} ends in the middle of a tar entry",
                              "the layer is truncated or not a tar archive; push or save the image again")

    while True:
        header = buf.take(BLOCK)
        if header is None:
            break                                   # no end-of-archive blocks: tolerated, as tar does
        if header.count(0) == BLOCK:
            break                                   # end of archive
        try:
            size = _octal(header[124:136])
        except ValueError:
            raise ImageReadError(f"{what} has a malformed tar header at entry {index.entries + 1}",
                                 "the layer is not a valid tar archive; rebuild the image") from None
        flag = header[156:157]
        if flag in (_GNU_LONGNAME, _GNU_LONGLINK, _PAX, _PAX_GLOBAL):
            data = buf.read_prefix(_padded(size), _padded(size))
            if data is None:
                raise truncated()
            data = data[:size]
            if flag == _GNU_LONGNAME:
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif flag == _GNU_LONGLINK:
                long_link = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif flag == _PAX:
                pax = _pax(data)
            continue
        if long_name is not None:
            name = long_name
        elif "path" in pax:
            name = pax["path"]
        else:
            name = _cstr(header[0:100])
            if header[257:262] == b"ustar" and header[345]:
                name = _cstr(header[345:500]) + "/" + name
        link = long_link if long_link is not None else pax.get("linkpath") or _cstr(header[157:257])
        if "size" in pax:
            size = int(pax["size"])
        long_name = long_link = None
        pax = {}
        index.entries += 1

        path = normalise(name)
        parent, _, base = path.rpartition("/")
        parent = parent or "/"
        data_len = size if flag in (_REG, _AREG, b"7") else 0
        if base.startswith(WHITEOUT):
            if base == OPAQUE:
                index.opaque.add(parent)
            else:
                index.whiteouts.add((parent.rstrip("/") + "/" + base[len(WHITEOUT):]))
            if not buf.skip(_padded(data_len)):
                raise truncated()
            continue
        if flag == _DIR:
            dirs.add(hash(path))
        else:
            files.add(hash(path))
        if parent != last_parent:           # a child implies its ancestors are directories in this layer
            last_parent = ancestor = parent
            while ancestor != "/":
                dirs.add(hash(ancestor))
                ancestor = ancestor.rpartition("/")[0] or "/"
        if flag == _SYM:
            symlinks[path] = link
        elif flag == _LNK:
            hardlinks[path] = normalise(link)
        extractors = matcher(path)
        if extractors is not None and flag != _DIR:
            kind = {_SYM: "symlink", _LNK: "hardlink"}.get(flag, "file" if data_len or flag in (_REG, _AREG) else "other")
            cand = Candidate(path, kind, size, link if flag in (_SYM, _LNK) else None)
            if extractors and kind == "file":
                keep = max(e.max_bytes for e in extractors)
                data = buf.read_prefix(_padded(data_len), min(keep, _padded(data_len)))
                if data is None:
                    raise truncated()
                data = data[:data_len]
                for e in extractors:
                    m = e.pattern.search(data, 0, e.max_bytes)
                    if m:
                        cand.captures[e.id] = ".".join(g.decode("utf-8", "replace") for g in m.groups() if g)
                candidates[path] = cand
                continue
            if kind == "hardlink":
                target = candidates.get(hardlinks[path])
                if target is not None:   # a hard link shares its target's content
                    cand.captures = dict(target.captures)
            candidates[path] = cand
        elif path in candidates:
            del candidates[path]         # replaced by an entry no rule names (e.g. a directory)
        if data_len and not buf.skip(_padded(data_len)):
            raise truncated()
    return index
