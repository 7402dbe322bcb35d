"""Blobs: descriptors, sha256 verification while streaming, and decompression sniffed from magic bytes.

Every byte a layer walker sees has gone through `VerifyingReader`, so a blob is trusted only once its
whole stream matched its digest (`finish()` raises otherwise).
"""

from __future__ import annotations

import hashlib
import queue
import threading
from dataclasses import dataclass, field
from typing import Iterator, Protocol

from infra_cli.image.strict_json import json_type, malformed, optional_object, optional_string
from infra_cli.image.errors import ImageReadError, Stopped
from infra_cli.image.limits import MAX_BLOB_BYTES, NO_DEADLINE, Deadline

RAW_CHUNK = 1 << 20          # compressed bytes read per call
OUT_CHUNK = 4 << 20          # most decompressed bytes produced per step: memory stays bounded
FETCHER_GRACE_S = 1.0       # past the deadline, how long a fetcher's own explanation is waited for
GZIP_MAGIC, ZSTD_MAGIC = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    platform: dict = field(default_factory=dict, compare=False)
    annotations: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, data: object, what: str, where: str | None = None) -> "Descriptor":
        """`data` as found at `what` (e.g. "manifest sha256:... layers[2]"), every field's type checked."""
        if not isinstance(data, dict):
            raise malformed(what, f"it is {json_type(data)} where a descriptor object belongs", where)
        digest = data.get("digest")
        if not isinstance(digest, str) or not digest:
            raise malformed(what, "it has no digest" if digest is None else f"its digest is {json_type(digest)}", where)
        # no size: unknown (-1), as containerd reads a size of 0; a stated one must be a byte count a blob can have
        size = data.get("size", -1)
        if not isinstance(size, int) or isinstance(size, bool):
            raise malformed(what, f"its size is {json_type(size)} where an integer belongs", where)
        if size < 0 and "size" in data:
            raise malformed(what, f"its size {size} is negative", where)
        if size > MAX_BLOB_BYTES:
            raise malformed(what, f"its size {size} is over the {MAX_BLOB_BYTES >> 40} TiB bound for a blob", where)
        return cls(optional_string(data, "mediaType", what, where) or "", digest, size,
                   optional_object(data, "platform", what, where), optional_object(data, "annotations", what, where))


def check_digest_syntax(digest: str, what: str | None = None) -> str:
    """The hex part of a sha256 digest; `what` names where the digest was found, for the message."""
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        raise ImageReadError(f"{what + ': ' if what else ''}unsupported or malformed digest {digest!r}",
                             "digests look like sha256:<64 lowercase hex digits>")
    return hexpart


def verify_bytes(data: bytes, digest: str, what: str) -> bytes:
    """Check a small blob (manifest, config) read whole against its digest."""
    want = check_digest_syntax(digest)
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise ImageReadError(f"{what} {digest} does not match its content (got sha256:{got}, {len(data)} bytes)",
                             "the blob is corrupt or truncated in the registry/archive; push or save the image again")
    return data


def overrun(what: str, digest: str, size: int) -> ImageReadError:
    return ImageReadError(f"{what} {digest} sends more than the {size} bytes its descriptor declares",
                          "the registry or archive serves other content than the manifest names; push the image again")


class BlobStream(Protocol):
    """What a store's open_blob returns: a file, a slice of an archive, a registry response."""

    def read(self, n: int = ..., /) -> bytes: ...

    def close(self) -> None: ...


def read_capped(stream: BlobStream, limit: int, what: str) -> bytes:
    """A small stream (a config) read whole, refused past `limit` bytes."""
    parts: list[bytes] = []
    have = 0
    while True:
        data = stream.read(min(RAW_CHUNK, limit + 1 - have))
        if not data:
            return b"".join(parts)
        parts.append(data)
        have += len(data)
        if have > limit:
            raise ImageReadError(f"{what} is larger than the {limit} bytes it may be",
                                 "the registry or archive serves other content than the manifest names")


class VerifyingReader:
    """Reads a raw blob stream in chunks, hashing and counting as it goes."""

    def __init__(self, stream: BlobStream, digest: str, size: int, what: str,
                 stop: threading.Event | None = None):
        self._want = check_digest_syntax(digest)
        self._stream, self.digest, self.size, self.what = stream, digest, size, what
        self._hash = hashlib.sha256()
        self.bytes_read = 0
        self._stop = stop

    def read(self, n: int = RAW_CHUNK) -> bytes:
        if self._stop is not None and self._stop.is_set():
            raise Stopped()
        if self.size >= 0:       # never past the declared size (+1 to see an overrun): an endless blob ends here
            n = min(n, self.size - self.bytes_read + 1)
        data = self._stream.read(n)
        if self.size >= 0 and self.bytes_read + len(data) > self.size:
            raise overrun(self.what, self.digest, self.size)
        if data:
            self._hash.update(data)
            self.bytes_read += len(data)
        return data

    def finish(self) -> None:
        """Drain what is left and raise unless the whole stream matched the digest and size."""
        while self.read(RAW_CHUNK):
            pass
        got = self._hash.hexdigest()
        if got != self._want or (self.size >= 0 and self.bytes_read != self.size):
            raise ImageReadError(
                f"{self.what} {self.digest} does not match its digest: read {self.bytes_read} bytes"
                f"{'' if self.size < 0 else f' of {self.size} declared'}, sha256:{got}",
                "the blob is corrupt or truncated in the registry/archive; push or save the image again")


class _End:
    """Queue marker: the blob was read whole and verified (`error` None) or failed (`error` set)."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


def _put(out: "queue.Queue", item: object, stop: threading.Event) -> bool:
    """Queue `item` unless told to stop first (the consumer may be gone: never block on a full queue)."""
    while True:
        try:
            out.put(item, timeout=0.1)
            return True
        except queue.Full:
            if stop.is_set():
                return False


def fetch_into(open_stream, digest: str, size: int, what: str, out: "queue.Queue", stop: threading.Event) -> int:
    """Producer side of a prefetched blob: read, hash and queue raw chunks; the queue's bound caps memory.
    Runs in a fetch thread (socket reads and sha256 release the GIL, so it overlaps decompression)."""
    reader = None
    try:
        stream = open_stream()
        try:
            reader = VerifyingReader(stream, digest, size, what, stop)
            while True:
                chunk = reader.read()
                if not chunk:
                    break
                if not _put(out, chunk, stop):
                    return reader.bytes_read
            reader.finish()
        finally:
            stream.close()
        _put(out, _End(), stop)
    except Stopped:
        pass
    except BaseException as exc:  # handed to the consumer, which raises it in the main thread
        _put(out, _End(exc), stop)
    return reader.bytes_read if reader else 0


class PrefetchedBlob:
    """Consumer side: the blob's raw chunks in order; `finish()` raises unless the fetcher verified it."""

    def __init__(self, source: "queue.Queue", digest: str, what: str, deadline: Deadline = NO_DEADLINE,
                 stop: threading.Event | None = None):
        self._queue, self.digest, self.what, self._deadline = source, digest, what, deadline
        self._stop = stop
        self._end: _End | None = None
        self.bytes_read = 0

    def read(self, n: int = RAW_CHUNK) -> bytes:
        if self._end is not None:
            return b""
        while True:
            try:
                item = self._queue.get(timeout=self._deadline.wait_s(0.2) + 0.05)
                break
            except queue.Empty:
                if self._stop is not None and self._stop.is_set():
                    raise Stopped() from None     # the fetcher was told to stop too: nothing more will come
                # past the deadline the fetcher is hung up on at once and says what it was waiting for;
                # its word is waited for a moment, this one only if it has none
                left = self._deadline.remaining()
                if left is not None and left < -FETCHER_GRACE_S:
                    raise self._deadline.error(f"waiting for {self.what} ({self.digest})") from None
        if isinstance(item, _End):
            self._end = item
            if item.error is not None:
                raise item.error
            return b""
        self.bytes_read += len(item)
        return item

    def finish(self) -> None:
        while self.read():
            pass


def _gzip_chunks(first: bytes, reader: VerifyingReader | PrefetchedBlob) -> Iterator[bytes]:
    from isal.igzip_lib import DECOMP_GZIP, IgzipDecompressor

    pending = first
    while True:
        d = IgzipDecompressor(flag=DECOMP_GZIP)
        while not d.eof:
            if d.needs_input:
                if not pending:
                    pending = reader.read()
                    if not pending:
                        raise ImageReadError(f"{reader.what} {reader.digest} ends in the middle of its gzip stream",
                                             "the blob is truncated; push or save the image again")
                out = d.decompress(pending, OUT_CHUNK)
                pending = b""
            else:
                out = d.decompress(b"", OUT_CHUNK)
            if out:
                yield out
        # a gzip file may hold several members back to back
        pending = d.unused_data or reader.read()
        if not pending:
            return


def _zstd_chunks(first: bytes, reader: VerifyingReader | PrefetchedBlob) -> Iterator[bytes]:
    import zstandard

    class _Prefixed:  # the sniffed bytes, then the rest of the stream
        def __init__(self):
            self.head = first

        def read(self, n: int = RAW_CHUNK) -> bytes:
            if self.head:
                head, self.head = self.head, b""
                return head
            return reader.read(n)

    # zstandard reads any object with read(size); its stubs ask for IO[bytes]
    stream = zstandard.ZstdDecompressor().stream_reader(_Prefixed(), read_size=RAW_CHUNK,  # type: ignore[arg-type]
                                                        read_across_frames=True)
    while True:
        out = stream.read(OUT_CHUNK)
        if not out:
            return
        yield out


def _plain_chunks(first: bytes, reader: VerifyingReader | PrefetchedBlob) -> Iterator[bytes]:
    if first:
        yield first
    while True:
        data = reader.read()
        if not data:
            return
        yield data


def sniff_compression(head: bytes) -> str:
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return "none"


def decompressed_chunks(reader: "VerifyingReader | PrefetchedBlob") -> tuple[str, Iterator[bytes]]:
    """(compression, chunks of the uncompressed tar stream); compression recognised by magic bytes."""
    first = reader.read()
    kind = sniff_compression(first)
    make = {"gzip": _gzip_chunks, "zstd": _zstd_chunks, "none": _plain_chunks}[kind]
    return kind, make(first, reader)
