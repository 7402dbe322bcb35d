"""Keep azure-ai-ml's own chatter out of our output, which says what matters in its own words.

Two kinds: its loggers (studio URLs, downloads, "experimental class" notices at INFO/WARNING, raised to
ERROR here) and a bare colour reset with blank lines it prints to stderr after every code or build-context
upload, whatever `show_progress` says (azure/ai/ml/_artifacts/_blob_storage_helper.py), which leaves
escape codes in CI logs. Anything else written to stderr passes through unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from typing import Iterator, TextIO

_UPLOAD_RESET = "\x1b[39m"  # colorama's Fore.RESET
_lock = threading.Lock()
_depth = 0
_saved: tuple[TextIO, list[logging.Logger], list[int]] | None = None


class _ResetFilter:
    """A stderr that drops the SDK's bare reset line (and the newline print() writes after it)."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._drop_newline = False

    def write(self, text: str) -> int:
        if _UPLOAD_RESET in text and not text.replace(_UPLOAD_RESET, "").strip():
            self._drop_newline = True
            return len(text)
        if self._drop_newline and text == "\n":
            self._drop_newline = False
            return len(text)
        self._drop_newline = False
        return self._inner.write(text)

    def __getattr__(self, name: str):  # flush, fileno, isatty, encoding... of the real stream
        return getattr(self._inner, name)


@contextlib.contextmanager
def quiet_sdk() -> Iterator[None]:
    """Re-entrant and thread-safe: concurrent uploads share one filter, removed when the last one ends."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = (sys.stderr, [], [])
            sys.stderr = _ResetFilter(sys.stderr)  # type: ignore[assignment]
        # each entry, nested ones too: azure-ai-ml's import sets its module loggers to INFO, so those it made since
        # the outer entry (loaded inside it) are lowered by the next
        assert _saved is not None
        known = set(_saved[1])
        for lg in [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)
                   if name.startswith("azure.ai.ml")] + [logging.getLogger("azure.ai.ml")]:
            if lg not in known:
                known.add(lg)
                _saved[1].append(lg)
                _saved[2].append(lg.level)
                lg.setLevel(logging.ERROR)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                stream, loggers, levels = _saved
                sys.stderr = stream
                for lg, level in zip(loggers, levels):
                    lg.setLevel(level)
                _saved = None
