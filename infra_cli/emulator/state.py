"""The emulated cloud's state: one SQLite file in the state directory, so it survives restarts.

Resources are JSON bodies keyed by (type, scope, name, version); ARM names are case-insensitive, so keys
are lower-cased while bodies keep the caller's spelling. Long-running operations and blob metadata live
beside them. One connection behind a lock: the emulator's request threads are few and requests short.

Several emulators may share one state directory (each `--local` command runs its own, beside an `infra emulator
serve`), so a read-check-write sequence is one SQLite transaction taken with BEGIN IMMEDIATE: the write lock
is held from the first read, and a second process's check waits until the first one's write is committed
(https://www.sqlite.org/lang_transaction.html). Without it, two processes could both see a version absent and
both "create" it, and both would believe they hold the stack lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.private_state import private_state_dir, refuse_link

STATE_FILE = "state.sqlite3"
INIT_LOCK = "state.init.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS resources (
    type TEXT NOT NULL, scope TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (type, scope, name, version));
CREATE TABLE IF NOT EXISTS operations (
    id TEXT PRIMARY KEY, type TEXT NOT NULL, scope TEXT NOT NULL, name TEXT NOT NULL,
    action TEXT NOT NULL, due REAL NOT NULL, fails INTEGER NOT NULL, status TEXT NOT NULL,
    error TEXT, payload TEXT);
CREATE TABLE IF NOT EXISTS blobs (
    container TEXT NOT NULL, name TEXT NOT NULL, metadata TEXT NOT NULL, content_type TEXT,
    etag TEXT NOT NULL, modified REAL NOT NULL, PRIMARY KEY (container, name));
"""


# The journal files SQLite keeps beside the database (https://www.sqlite.org/tempfiles.html).
_SIDE_FILES = ("-wal", "-shm", "-journal")
_CORRUPT = ("SQLITE_NOTADB", "SQLITE_CORRUPT")
CORRUPT_RULE = "local.state-corrupt"


def _state_error(message: str, hint: str, rule: str = "local.state-unusable") -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", rule, message, None, None, None, hint)])


def unwritable_state(path: Path, exc: BaseException) -> DiagnosticError:
    """SQLite could not write (SQLITE_FULL, SQLITE_IOERR: a full disk, a file over its size limit): the
    transaction was rolled back, so the state is as it was before the change."""
    return _state_error(f"cannot write the local emulator's state {path}: {exc} (is the disk full, or the file over "
                        "its size limit?); the change was rolled back, nothing was half-written",
                        f"free space on the disk that holds {path.parent} (or raise the file size limit, ulimit -f) "
                        "and run the command again", "local.state-unwritable")


def _cannot_write(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR") or "disk" in str(exc)


def corrupt_state(path: Path, damage: str) -> DiagnosticError:
    return _state_error(f"the local emulator's state {path} is not a readable SQLite database ({damage})",
                        f"move it aside to start over with an empty local cloud: infra emulator reset --dir "
                        f"{path.parent} (or mv {path} {path}.corrupt); nothing is deleted", CORRUPT_RULE)


def move_aside(state_dir: Path) -> list[tuple[Path, Path]]:
    """Rename the state database and its journal files to NAME.aside-TIME (kept for inspection); returns
    (from, to) for each file moved. The next emulator over state_dir starts an empty cloud."""
    state_dir = private_state_dir(state_dir, create=False)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    moved = []
    for name in (STATE_FILE, *(STATE_FILE + suffix for suffix in _SIDE_FILES)):
        source = state_dir / name
        if os.path.lexists(source):
            target = state_dir / f"{name}.aside-{stamp}"
            os.rename(source, target)
            moved.append((source, target))
    return moved


@dataclass(frozen=True)
class Row:
    scope: str
    name: str
    version: str
    body: dict
    created: float
    updated: float


@dataclass(frozen=True)
class Operation:
    id: str
    type: str
    scope: str
    name: str
    action: str         # create | update | delete | cancel
    due: float          # when the operation ends
    fails: bool         # decided when it started (fault injection)
    status: str         # InProgress | Succeeded | Failed
    error: dict | None
    payload: dict | None


@contextlib.contextmanager
def _init_lock(state_dir: Path) -> Iterator[None]:
    """DIR/state.init.lock held exclusive (flock: the kernel drops it if the process dies) while the database is
    opened and its schema made."""
    fd = os.open(state_dir / INIT_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class Store:
    def __init__(self, state_dir: Path):
        state_dir = private_state_dir(state_dir)
        path = state_dir / STATE_FILE
        for name in (STATE_FILE, *(STATE_FILE + suffix for suffix in _SIDE_FILES)):
            refuse_link(state_dir / name)       # SQLite would follow it
        # The state holds job specs with their environment variables (secrets among them): owner-only.
        # SQLite gives the -wal and -shm files the database file's mode.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                raise _state_error(f"{path} is not a regular file of this user",
                                   f"move it aside (infra emulator reset --dir {state_dir}) or chown it to yourself")
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        try:
            # One process at a time: switching a new database to WAL takes an exclusive lock that SQLite does not
            # wait for (SQLITE_BUSY at once, "database is locked"), so concurrent first runs over one fresh
            # directory took turns through no busy handler and one of them failed under load.
            with _init_lock(state_dir):
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                damage = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if _cannot_write(exc):
                raise unwritable_state(path, exc) from None
            if getattr(exc, "sqlite_errorname", "") not in _CORRUPT:   # locked past the timeout, read-only, ...
                raise _state_error(f"cannot use the local emulator's state {path}: {exc}",
                                   "another infra process may hold it for long; check it is yours and writable") from None
            damage = str(exc)
        if damage != "ok":
            self._db.close()
            raise corrupt_state(path, damage)
        self._path = path
        self._lock = threading.RLock()
        self._transaction = _Transaction(self._db, self._lock, path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def lock(self) -> "_Transaction":
        """Held across a read-check-write sequence that must not interleave with another request, in this
        process (a thread lock) or in another one sharing the state directory (an immediate transaction)."""
        return self._transaction

    # resources
    def get(self, type_: str, scope: str, name: str, version: str = "") -> dict | None:
        row = self._one("SELECT body FROM resources WHERE type=? AND scope=? AND name=? AND version=?",
                        (type_, scope.lower(), name.lower(), version.lower()))
        return json.loads(row[0]) if row else None

    def put(self, type_: str, scope: str, name: str, body: dict, version: str = "") -> None:
        now = time.time()
        with self._lock:
            self._write(
                "INSERT INTO resources (type, scope, name, version, body, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (type, scope, name, version) "
                "DO UPDATE SET body=excluded.body, updated=excluded.updated",
                (type_, scope.lower(), name.lower(), version.lower(), json.dumps(body), now, now))

    def delete(self, type_: str, scope: str, name: str, version: str = "") -> None:
        with self._lock:
            self._write("DELETE FROM resources WHERE type=? AND scope=? AND name=? AND version=?",
                             (type_, scope.lower(), name.lower(), version.lower()))

    def rows(self, type_: str, scope: str | None = None, name: str | None = None) -> list[Row]:
        sql, args = "SELECT scope, name, version, body, created, updated FROM resources WHERE type=?", [type_]
        if scope is not None:
            sql += " AND scope=?"
            args.append(scope.lower())
        if name is not None:
            sql += " AND name=?"
            args.append(name.lower())
        with self._lock:
            found = self._db.execute(sql + " ORDER BY created, name, version", args).fetchall()
        return [Row(s, n, v, json.loads(b), c, u) for s, n, v, b, c, u in found]

    # long-running operations
    def add_operation(self, op: Operation) -> None:
        with self._lock:
            self._write(
                "INSERT INTO operations (id, type, scope, name, action, due, fails, status, error, payload) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (op.id, op.type, op.scope.lower(), op.name.lower(), op.action, op.due, int(op.fails), op.status,
                 json.dumps(op.error) if op.error else None, json.dumps(op.payload) if op.payload else None))

    def operation(self, op_id: str) -> Operation | None:
        row = self._one("SELECT id, type, scope, name, action, due, fails, status, error, payload "
                        "FROM operations WHERE id=?", (op_id,))
        return _operation(row) if row else None

    def operations(self, status: str | None = None, due_before: float | None = None) -> list[Operation]:
        sql = "SELECT id, type, scope, name, action, due, fails, status, error, payload FROM operations"
        args: list[str | float] = []
        conds = []
        if status is not None:
            conds.append("status=?")
            args.append(status)
        if due_before is not None:
            conds.append("due<=?")
            args.append(due_before)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        with self._lock:
            return [_operation(r) for r in self._db.execute(sql + " ORDER BY due", args).fetchall()]

    def finish_operation(self, op_id: str, status: str, error: dict | None = None) -> None:
        with self._lock:
            self._write("UPDATE operations SET status=?, error=? WHERE id=?",
                             (status, json.dumps(error) if error else None, op_id))

    # blob metadata (the bytes live in files: see blobs.py)
    def blob(self, container: str, name: str) -> dict[str, Any] | None:
        row = self._one("SELECT metadata, content_type, etag, modified FROM blobs WHERE container=? AND name=?",
                        (container, name))
        if not row:
            return None
        return {"metadata": json.loads(row[0]), "content_type": row[1], "etag": row[2], "modified": row[3]}

    def put_blob(self, container: str, name: str, metadata: dict[str, str], content_type: str | None,
                 etag: str) -> None:
        with self._lock:
            self._write(
                "INSERT INTO blobs (container, name, metadata, content_type, etag, modified) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (container, name) DO UPDATE SET metadata=excluded.metadata, "
                "content_type=excluded.content_type, etag=excluded.etag, modified=excluded.modified",
                (container, name, json.dumps(metadata), content_type, etag, time.time()))

    def delete_blob(self, container: str, name: str) -> None:
        with self._lock:
            self._write("DELETE FROM blobs WHERE container=? AND name=?", (container, name))

    def blob_names(self, container: str, prefix: str = "") -> list[str]:
        # substr, not LIKE: blob names are case-sensitive and may hold % or _.
        with self._lock:
            found = self._db.execute(
                "SELECT name FROM blobs WHERE container=? AND substr(name, 1, ?)=? ORDER BY name",
                (container, len(prefix), prefix)).fetchall()
        return [r[0] for r in found]

    def _write(self, sql: str, args: tuple) -> None:
        with self._lock:
            try:
                self._db.execute(sql, args)
            except sqlite3.OperationalError as exc:   # one statement: SQLite undid it whole
                if _cannot_write(exc):
                    raise unwritable_state(self._path, exc) from None
                raise

    def _one(self, sql: str, args: tuple) -> tuple | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()


class _Transaction:
    """Re-entrant per thread: the outermost `with` begins an immediate transaction and commits it (rolls it
    back if the block raised); nested ones join it."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: Path):
        self._db, self._lock, self._path = db, lock, path
        self._depth = 0

    def __enter__(self) -> "_Transaction":
        self._lock.acquire()
        if self._depth == 0:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._lock.release()
                raise
        self._depth += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._end(rollback=exc_type is not None)
        finally:
            self._lock.release()

    def _end(self, *, rollback: bool) -> None:
        """COMMIT (ROLLBACK after an error). A commit SQLite cannot write is rolled back and named: a full disk
        leaves the state as it was before the transaction."""
        try:
            if not rollback:
                self._db.execute("COMMIT")
                return
        except sqlite3.OperationalError as exc:
            if not _cannot_write(exc):
                raise
            self._rollback()
            raise unwritable_state(self._path, exc) from None
        self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:   # SQLite may have rolled back already (an I/O error inside the transaction)
            self._db.execute("ROLLBACK")


def _operation(row: tuple) -> Operation:
    op_id, type_, scope, name, action, due, fails, status, error, payload = row
    return Operation(op_id, type_, scope, name, action, due, bool(fails), status,
                     json.loads(error) if error else None, json.loads(payload) if payload else None)
