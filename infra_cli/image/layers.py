"""One layer's tar stream -> a compact `LayerIndex`, walking 512-byte headers without tarfile.

What is kept per layer is what the merged view and the evidence rules need, never file data: hashes of
every path (existence and shadowing), whiteouts and opaque directories, link targets, and for the few
entries the evidence rules name, the versions their regexes found. Memory is bounded by the number of
paths (MAX_INDEXED_PATHS per image), never by the layer's size; headers that tar buffers whole (PAX, GNU long
names) are bounded before they are read, and their records are parsed strictly (see limits.py).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

from infra_cli.image.errors import ImageReadError, Stopped
from infra_cli.image.limits import (MAX_INDEXED_NAME_BYTES, MAX_INDEXED_PATHS, MAX_PATH_BYTES, MAX_SPECIAL_BYTES,
                                     NO_DEADLINE, Deadline)

WHITEOUT, OPAQUE = ".wh.", ".wh..wh..opq"
BLOCK = 512
# tar type flags
_REG, _AREG, _LNK, _SYM, _DIR = b"0", b"\0", b"1", b"2", b"5"
_GNU_LONGNAME, _GNU_LONGLINK, _PAX, _PAX_GLOBAL = b"L", b"K", b"x", b"g"
_LINKS = (_LNK, _SYM)


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
    # hard links whose target no earlier entry of this layer holds: a lower layer must
    # (merged_filesystem.check_hardlinks)
    external_links: dict = field(default_factory=dict)
    candidates: dict = field(default_factory=dict)  # path -> Candidate

    @property
    def number(self) -> int:
        """The layer as users see it (text, JSON evidence, layers[]): counted from 1 in manifest order, the base
        first, as `skopeo inspect` lists them (`docker history` lists them top first)."""
        return layer_number(self.position)


def layer_number(position: int) -> int:
    """Manifest index (0 = bottom) -> the one number every output shows."""
    return position + 1


def normalise(name: str) -> str:
    """'./usr/bin/' -> '/usr/bin'; tar names are relative to the image root."""
    if name.startswith("./"):
        name = name[2:]
    name = name.strip("/")
    return "/" + name if name and name != "." else "/"


def link_path(link: str, bad: Callable[[str], ImageReadError]) -> str:
    """A hard link's target as tar extraction resolves it, relative to the root being extracted: '.' and '..'
    taken as Go's filepath.Clean takes them, and a target above the root refused, as container runtimes do
    (containers/storage and moby's pkg/archive: "invalid hardlink")."""
    parts: list[str] = []
    for comp in link.split("/"):
        if comp == "..":
            if not parts:
                raise bad(f"its hard link target {link[:200]!r} is outside the image root")
            parts.pop()
        elif comp not in ("", "."):
            parts.append(comp)
    return "/" + "/".join(parts)


def octal(field_: bytes) -> int:
    if field_[:1] and field_[0] & 0x80:          # GNU base-256 for sizes over 8 GiB
        value = int.from_bytes(field_, "big") & ~(0x80 << (8 * (len(field_) - 1)))
        return value
    text = field_.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def cstr(field_: bytes) -> str:
    return field_.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


_PAX_LENGTH = re.compile(rb"(-?\d{1,20}) ")
_DECIMAL = re.compile(r"[0-9]{1,20}")


def _pax(data: bytes, bad: Callable[[str], ImageReadError]) -> dict[str, str]:
    """POSIX pax records, "LENGTH KEY=VALUE\\n" where LENGTH counts the whole record, read strictly: a length
    that does not move the cursor forward or runs past the header is refused, never looped on."""
    out, pos = {}, 0
    while pos < len(data):
        if data[pos] == 0 and not data[pos:].rstrip(b"\0"):
            break                                           # NUL padding after the last record
        m = _PAX_LENGTH.match(data, pos)
        if not m:
            raise bad("its PAX record does not start with its length")
        length = int(m.group(1))
        if length < m.end() - pos + 3:                      # at least "K=\n" after the length and space
            raise bad(f"its PAX record of length {length} is shorter than a record can be")
        if pos + length > len(data):
            raise bad(f"its PAX record of length {length} runs past the end of the header ({len(data) - pos} bytes left)")
        record = data[m.end(): pos + length]
        if not record.endswith(b"\n"):
            raise bad(f"its PAX record of length {length} does not end in a newline")
        key, eq, value = record[:-1].partition(b"=")
        if not eq or not key:
            raise bad(f"its PAX record of length {length} has no key=value")
        out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    if "size" in out and not _DECIMAL.fullmatch(out["size"]):
        raise bad(f"its PAX size {out['size'][:40]} is not a decimal byte count")
    return out


class _Buffer:
    """The uncompressed stream as a cursor over decompressed chunks; every byte is copied a bounded number of
    times (a long read joins its chunks once, never re-concatenates per chunk)."""

    def __init__(self, chunks: Iterator[bytes], on_chunk: Callable[[], None]):
        self._chunks, self._on_chunk = chunks, on_chunk
        self.buf, self.pos = b"", 0
        self.short = 0      # after a take() that found the stream's end: how many bytes it did find

    def _next(self) -> bytes | None:
        self._on_chunk()
        return next(self._chunks, None)

    def take(self, n: int) -> bytes | None:
        end = self.pos + n
        if end <= len(self.buf):
            self.pos = end
            return self.buf[end - n:end]
        parts, have = [self.buf[self.pos:]], len(self.buf) - self.pos
        while True:
            chunk = self._next()
            if chunk is None:
                self.short = have
                return None
            if have + len(chunk) >= n:
                used = n - have
                parts.append(chunk[:used])
                self.buf, self.pos = chunk, used
                return b"".join(parts)
            parts.append(chunk)
            have += len(chunk)

    def skip(self, n: int) -> bool:
        while len(self.buf) - self.pos < n:
            n -= len(self.buf) - self.pos
            self.buf, self.pos = b"", 0
            chunk = self._next()
            if chunk is None:
                return False
            self.buf = chunk
        self.pos += n
        return True

    def read_prefix(self, n: int, keep: int) -> bytes | None:
        """Read an entry's n data bytes, returning only the first `keep` of them."""
        if n <= keep:
            return self.take(n)
        head = self.take(keep)
        return head if head is not None and self.skip(n - keep) else None


def padded(n: int) -> int:
    return (n + BLOCK - 1) // BLOCK * BLOCK


# Entries that extend the next one (or every one, for a global header) rather than stand for a file.
SPECIAL = {_GNU_LONGNAME: "GNU long name", _GNU_LONGLINK: "GNU long link name", _PAX: "PAX extended header",
           _PAX_GLOBAL: "PAX global header"}


def special_length(flag: bytes, size: int, bad: Callable[[str], ImageReadError]) -> int:
    """The padded length to read for a special entry, refused over MAX_SPECIAL_BYTES: it is buffered whole,
    so it is bounded before a byte of it is read, as tar readers do."""
    if size > MAX_SPECIAL_BYTES:
        raise bad(f"a {SPECIAL[flag]} of {size} bytes is over the {MAX_SPECIAL_BYTES >> 20} MiB bound for one")
    return padded(size)


def ustar_name(header: bytes) -> str:
    """The name a header holds itself (ustar splits a long one into prefix and name)."""
    name = cstr(header[0:100])
    if header[257:262] == b"ustar" and header[345]:
        return cstr(header[345:500]) + "/" + name
    return name


class Extended:
    """What special entries say about the entry that follows them: its long name, link name, PAX records.
    `pending` is False for most entries, which then take name and link from their own header (no header
    field can exceed PATH_MAX)."""

    def __init__(self) -> None:
        self.long_name: str | None = None
        self.long_link: str | None = None
        self.pax: dict[str, str] = {}
        self.pending = False

    def add(self, flag: bytes, data: bytes, bad: Callable[[str], ImageReadError]) -> None:
        if flag == _GNU_LONGNAME:
            self.long_name = cstr(data)
        elif flag == _GNU_LONGLINK:
            self.long_link = cstr(data)
        elif flag == _PAX:
            self.pax = _pax(data, bad)
        else:                                       # a global header: parsed (strictly), not applied
            _pax(data, bad)
        self.pending = self.long_name is not None or self.long_link is not None or bool(self.pax)

    def apply(self, header: bytes, size: int, bad: Callable[[str], ImageReadError]) -> tuple[str, str, int]:
        """(name, link target, data size) of the pending entry `header` starts; then nothing is pending."""
        pax = self.pax
        name = self.long_name if self.long_name is not None else pax["path"] if "path" in pax else ustar_name(header)
        link = self.long_link if self.long_link is not None else pax.get("linkpath") or cstr(header[157:257])
        for noun, text in (("path", name), ("link target", link)):
            if len(text) > MAX_PATH_BYTES:
                raise bad(f"its {noun} of {len(text)} bytes is longer than Linux's PATH_MAX ({MAX_PATH_BYTES}), "
                          "so no container runtime can extract it")
        if "size" in pax:
            size = int(pax["size"])
        self.long_name = self.long_link = None
        self.pax = {}
        self.pending = False
        return name, link, size


class PathBudget:
    """What one image may index (MAX_INDEXED_PATHS paths, MAX_INDEXED_NAME_BYTES of implied directory names),
    shared by the layers of one image, which may be walked by several threads at once.

    Layers are ranked top-down (rank 0 is read first). A walker takes its allowance in grants, so the lock is
    taken once per GRANT_PATHS entries, not per entry. The memory bound holds for all walkers together; and so
    that a lower layer walked ahead cannot make an upper one fail where reading top-down would not, a layer
    with a layer above it still being walked (not the head) takes grants only while half the bound is left
    and otherwise waits until it is the head. The head takes whatever is left; past it the image is refused.
    """

    GRANT_PATHS, GRANT_NAMES = 1 << 16, 8 << 20

    def __init__(self, layers: int = 1, paths: int | None = None, names: int | None = None):
        self.paths = MAX_INDEXED_PATHS if paths is None else paths
        self.names = MAX_INDEXED_NAME_BYTES if names is None else names
        self._half = (self.paths // 2, self.names // 2)
        self._unfinished = set(range(layers))
        self._cancelled = False
        self._cond = threading.Condition()

    def _is_head(self, rank: int) -> bool:
        return min(self._unfinished, default=rank) >= rank

    def grant(self, rank: int, paths: int, names: int, deadline: Deadline = NO_DEADLINE) -> tuple[int, int] | None:
        """At least (`paths`, `names`) more for the layer of `rank`, or None: the bound is spent."""
        with self._cond:
            while True:
                if self._cancelled:
                    raise Stopped()
                deadline.check("waiting for the layers above to be indexed")
                head = self._is_head(rank)
                take_p = min(max(paths, self.GRANT_PATHS), self.paths)
                take_n = min(max(names, self.GRANT_NAMES), self.names)
                floor_p, floor_n = (0, 0) if head else self._half
                if take_p >= paths and take_n >= names and self.paths - take_p >= floor_p and \
                        self.names - take_n >= floor_n:
                    self.paths -= take_p
                    self.names -= take_n
                    return take_p, take_n
                if head:
                    return None
                self._cond.wait(deadline.wait_s(0.5))

    def finish(self, rank: int, paths_left: int, names_left: int) -> None:
        """The layer of `rank` is walked (or failed); what it was granted and did not use goes back."""
        with self._cond:
            self.paths += max(paths_left, 0)
            self.names += max(names_left, 0)
            self._unfinished.discard(rank)
            self._cond.notify_all()

    def cancel(self) -> None:
        """Wake every waiting walker with Stopped: the check is over."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()


def index_layer(chunks: Iterator[bytes], position: int, digest: str, matcher: Matcher, what: str,
                deadline: Deadline = NO_DEADLINE, budget: PathBudget | None = None, rank: int = 0) -> LayerIndex:
    """Walk a layer's uncompressed tar stream once and index it (see module docstring).

    `budget` is shared by the layers of one image (this one is `rank`-th from the top): indexed paths count
    against it."""
    budget = budget if budget is not None else PathBudget()
    left = [0, 0]       # paths, directory-name bytes granted and not yet used
    try:
        return _walk(chunks, LayerIndex(position, digest), matcher, what, deadline, budget, rank, left)
    finally:
        budget.finish(rank, *left)


def _walk(chunks: Iterator[bytes], index: LayerIndex, matcher: Matcher, what: str, deadline: Deadline,
          budget: PathBudget, rank: int, left: list[int]) -> LayerIndex:
    files, dirs, symlinks, hardlinks, candidates = (index.files, index.dirs, index.symlinks,
                                                    index.hardlinks, index.candidates)
    paths_left = names_left = 0
    buf = _Buffer(chunks, lambda: deadline.check(f"reading {what}"))
    extended = Extended()
    last_parent = None

    def truncated(part: str = "entry") -> ImageReadError:
        return ImageReadError(f"{what} ends in the middle of a tar {part} (after {index.entries} entries)",
                              "the layer is truncated or not a tar archive; push or save the image again")

    def next_header() -> bytes | None:
        """The next 512-byte block, or None where the stream ends between blocks (Go's archive/tar: io.EOF);
        a stream that ends inside one is truncated (io.ErrUnexpectedEOF there)."""
        block = buf.take(BLOCK)
        if block is None and buf.short:
            raise truncated("header")
        return block

    def bad(problem: str, entry: int | None = None) -> ImageReadError:
        """`problem` with the entry it is in (`entry`, counted from 1; default: the one being started)."""
        return ImageReadError(f"{what}: tar entry {entry or index.entries + 1}: {problem}",
                              "the layer is not a tar archive any tool writes; rebuild the image from trusted sources")

    def imply_ancestors(parent: str) -> None:
        """A path's ancestors are directories of this layer. Every path in `dirs` has its ancestors there
        too, so the climb stops at the first one already known: each directory is hashed once per layer."""
        nonlocal paths_left, names_left
        ancestor = parent
        while ancestor != "/":
            h = hash(ancestor)
            if h in dirs:
                break
            dirs.add(h)
            paths_left -= 1
            names_left -= len(ancestor)
            ancestor = ancestor.rpartition("/")[0] or "/"

    while True:
        header = next_header()
        if header is None:
            break                                   # no end-of-archive blocks: tolerated, as tar does
        if not header[0] and header.count(0) == BLOCK:   # end of archive: two zero blocks, or one and the stream's end
            after = next_header()
            if after is not None and after.count(0) != BLOCK:
                raise bad("a zero block followed by a tar header: tar readers (Go's archive/tar, which container "
                          "runtimes use) refuse the entries after it")
            break
        try:
            size = octal(header[124:136])
        except ValueError:
            raise ImageReadError(f"{what} has a malformed tar header at entry {index.entries + 1}",
                                 "the layer is not a valid tar archive; rebuild the image") from None
        flag = header[156:157]
        if flag in SPECIAL:
            data = buf.take(special_length(flag, size, bad))
            if data is None:
                raise truncated()
            extended.add(flag, data[:size], bad)
            continue
        if extended.pending:
            name, link, size = extended.apply(header, size, bad)
        else:                               # the link name is read only for the entries that have one
            name, link = ustar_name(header), cstr(header[157:257]) if flag in _LINKS else ""
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
            paths_left -= 1
            if not buf.skip((data_len + BLOCK - 1) & -BLOCK):
                raise truncated()
            continue
        paths_left -= 1
        if flag == _LNK:
            # tar makes a hard link to a file already extracted: an earlier entry of this layer, or one a lower
            # layer left (OCI layer.md, Hardlinks); a directory never
            target = hardlinks[path] = link_path(link, lambda problem: bad(f"{path}: {problem}", index.entries))
            if hash(target) in dirs:
                raise bad(f"{path} is a hard link to {target}, a directory, which no file system allows",
                          index.entries)
            if hash(target) not in files:
                index.external_links[path] = target
        if flag == _DIR:
            h = hash(path)
            if h not in dirs:
                dirs.add(h)
                imply_ancestors(parent)
        else:
            files.add(hash(path))
            if parent != last_parent:       # a child implies its ancestors are directories in this layer
                last_parent = parent
                imply_ancestors(parent)
        if paths_left < 0 or names_left < 0:
            more = budget.grant(rank, max(-paths_left, 0), max(-names_left, 0), deadline)
            if more is None:
                raise bad(f"the image's entries and the directories their paths imply exceed the bound for one "
                          f"image ({MAX_INDEXED_PATHS:,} paths, {MAX_INDEXED_NAME_BYTES >> 20} MiB of directory names)")
            paths_left += more[0]
            names_left += more[1]
            left[:] = paths_left, names_left
        if flag == _SYM:
            symlinks[path] = link
        extractors = matcher(path)
        if extractors is not None and flag != _DIR:
            kind = {_SYM: "symlink", _LNK: "hardlink"}.get(flag, "file" if data_len or flag in (_REG, _AREG) else "other")
            cand = Candidate(path, kind, size, link if flag in (_SYM, _LNK) else None)
            if extractors and kind == "file":
                keep = max(e.max_bytes for e in extractors)
                data = buf.read_prefix(padded(data_len), min(keep, padded(data_len)))
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
                linked = candidates.get(hardlinks[path])
                if linked is not None:   # a hard link shares its target's content
                    cand.captures = dict(linked.captures)
            candidates[path] = cand
        elif path in candidates:
            del candidates[path]         # replaced by an entry no rule names (e.g. a directory)
        if data_len and not buf.skip((data_len + BLOCK - 1) & -BLOCK):
            raise truncated()
    left[:] = paths_left, names_left
    return index
