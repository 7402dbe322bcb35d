"""The bounds the image reader holds every input to, and the whole-check deadline (`--timeout`).

Whatever a layer, a document or a registry says, a check ends in bounded time and memory; going over a bound
is an ImageReadError (exit 2) that names what overran, never a hang, a blow-up or a traceback.
"""

from __future__ import annotations

import time

from infra_cli.image.errors import ImageReadError

# PAX extended headers and GNU long names are buffered whole: Go's archive/tar caps them at 1 MiB
# (maxSpecialFileSize, https://go.dev/issue/54853, CVE-2022-2879).
MAX_SPECIAL_BYTES = 1 << 20
# Linux's PATH_MAX (https://github.com/torvalds/linux/blob/master/include/uapi/linux/limits.h): no runtime
# can extract a longer path or link target, and paths this long are what makes directory bookkeeping costly.
MAX_PATH_BYTES = 4096
# Manifests, indexes and configs: 4 MB, as containers/image and the Docker registry
# (https://pkg.go.dev/github.com/containers/image/v5/internal/iolimits); token and error answers 1 MB there too.
MAX_DOCUMENT_BYTES = 4 << 20
MAX_SMALL_ANSWER_BYTES = 1 << 20
# JSON nesting: real image documents nest under 10 levels; 128 is serde_json's default recursion limit
# (https://docs.rs/serde_json/latest/serde_json/struct.Deserializer.html#method.disable_recursion_limit).
MAX_JSON_DEPTH = 128
# Paths indexed per image (every entry and the directories its path implies, per layer): about 80 MB of
# hashes, several times the largest training images; a bound so that deep paths cannot multiply memory.
MAX_INDEXED_PATHS = 1_500_000
# ... and bytes of path names hashed for that: each directory is hashed once per layer, but a path 2,000
# directories deep under a new top directory implies 2,000 new ones, of up to PATH_MAX bytes each.
MAX_INDEXED_NAME_BYTES = 256 << 20
# A descriptor's size (a layer, config or manifest): OCI makes it an int64
# (https://github.com/opencontainers/image-spec/blob/main/descriptor.md), and Azure Container Registry takes
# layers of at most 200 GiB (https://learn.microsoft.com/azure/container-registry/container-registry-skus).
# 1 TiB leaves room for a `docker save` layer, which is stored uncompressed; past it a size is no image's.
MAX_BLOB_BYTES = 1 << 40
DEFAULT_TIMEOUT_S = 300
TIMEOUT_HINT = "raise --timeout if the registry is merely slow; otherwise the registry or image is at fault"


class DeadlineExceeded(ImageReadError):
    """The whole check ran out of its --timeout."""


class Deadline:
    """One clock for a whole check: every read, connect and wait takes its time from what is left."""

    def __init__(self, seconds: float | None = DEFAULT_TIMEOUT_S):
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self._end is None else self._end - time.monotonic()

    def expired(self) -> bool:
        return self._end is not None and time.monotonic() >= self._end

    def error(self, doing: str) -> DeadlineExceeded:
        return DeadlineExceeded(f"the --timeout of {self.seconds:g} s ran out {doing}", TIMEOUT_HINT)

    def check(self, doing: str) -> None:
        if self.expired():
            raise self.error(doing)

    def wait_s(self, cap: float) -> float:
        """How long one blocking call may wait: `cap`, or less when less time is left (never 0: 0 means
        non-blocking to sockets and queues)."""
        left = self.remaining()
        return cap if left is None else max(min(cap, left), 0.001)


NO_DEADLINE = Deadline(None)
