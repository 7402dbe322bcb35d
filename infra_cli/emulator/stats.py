"""Every request the emulator answered (method, path, status), for tests and benchmarks to count."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

WRITE_METHODS = frozenset({"PUT", "POST", "PATCH", "DELETE"})


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str       # without the query string
    status: int


class RequestStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self._records.append(RequestRecord(method, path, status))

    def reset(self) -> None:
        with self._lock:
            self._records.clear()

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    @property
    def total(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def writes(self) -> int:
        """Requests that may change state (PUT, POST, PATCH, DELETE), faults included."""
        with self._lock:
            return sum(r.method in WRITE_METHODS for r in self._records)

    def by_method(self) -> dict[str, int]:
        with self._lock:
            return dict(Counter(r.method for r in self._records))

    def by_status(self) -> dict[int, int]:
        with self._lock:
            return dict(Counter(r.status for r in self._records))

    def matching(self, method: str | None = None, path_contains: str = "") -> list[RequestRecord]:
        needle = path_contains.lower()
        return [r for r in self.records
                if (method is None or r.method == method) and needle in r.path.lower()]
