"""infra's local state, trusted only as OpenSSH trusts its files: `--local` keeps a cloud in a directory (tokens,
keys, a job runner's shims); a directory someone else owns or may write is refused, as OpenSSH's StrictModes refuses
~/.ssh (https://man.openbsd.org/sshd_config#StrictModes), and no symbolic link inside it is ever followed. Also the
random keys kept there and the files written there whole (replaced, never written through a link)."""

from __future__ import annotations

import errno
import os
import pwd
import shlex
import stat
from pathlib import Path

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import LOCAL_STATE_MARKERS
from infra_cli.safe_files import open_beneath

STATE_RULE = "local.state-untrusted"


def _untrusted(message: str, hint: str) -> DiagnosticError:
    return DiagnosticError([Diagnostic("error", STATE_RULE, message, None, None, None, hint)])


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _check_private_dir(path: Path, info: os.stat_result) -> None:
    quoted = shlex.quote(str(path))
    if stat.S_ISLNK(info.st_mode):
        raise _untrusted(f"{path} is a symbolic link: infra follows no link in its local state",
                         f"remove the link (rm {quoted}) or point INFRA_LOCAL_DIR at the real directory")
    if not stat.S_ISDIR(info.st_mode):
        raise _untrusted(f"{path} is not a directory", f"move it aside (mv {quoted} {quoted}.old)")
    if info.st_uid != os.getuid():
        raise _untrusted(f"{path} is owned by {_owner(info.st_uid)}, not by this user ({_owner(os.getuid())}): "
                         "whoever owns it can make infra write or run files of theirs",
                         f"use a directory of your own (INFRA_LOCAL_DIR), or take it: chown -R {os.getuid()} {quoted}")
    if info.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("its group", 0o020), ("other users", 0o002)) if info.st_mode & bit)
        raise _untrusted(f"{path} may be written by {who} ({stat.filemode(info.st_mode)}): they could plant links "
                         "or files infra would trust", f"chmod go-w {quoted}")


def private_state_dir(path: Path, *, create: bool = True) -> Path:
    """The local state directory (INFRA_LOCAL_DIR, ./.infra/local, `emulator serve --dir`), made mode 0700 if
    absent (create; else FileNotFoundError), refused (DiagnosticError local.state-untrusted, naming the path and the fix) when it is a link, is
    owned by another user or is writable by group or others, or when a directory above it could be changed by
    another user (not ours or root's, or group/world-writable without the sticky bit, as /tmp has)."""
    path = Path(path).absolute()
    if create:
        marker = path.parent if path.parent.name == LOCAL_STATE_MARKERS[0] else None
        made_marker = marker is not None and not os.path.lexists(marker)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            pass        # a file or a dangling link: said below
        if marker is not None and made_marker:
            _ignore_everything_in(marker)
    _check_private_dir(path, os.lstat(path))
    for above in path.parents:
        info = os.stat(above)
        if info.st_uid not in (0, os.getuid()):
            raise _untrusted(f"{above}, above the state directory {path}, is owned by {_owner(info.st_uid)}: "
                             "its owner could replace the state directory", "use a state directory (INFRA_LOCAL_DIR) "
                             "under a directory of your own")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise _untrusted(f"{above}, above the state directory {path}, may be written by other users "
                             f"({stat.filemode(info.st_mode)}): they could replace the state directory",
                             f"chmod go-w {shlex.quote(str(above))}, or use a state directory elsewhere")
    return path


def _ignore_everything_in(folder: Path) -> None:
    """A `.infra/` infra made holds its local cloud (token, TLS key, state): a `.gitignore` of `*` keeps it out of
    `git status` and commits, as pytest does for its cache. Written only where infra made the folder: one the user
    made may hold files they mean to commit."""
    try:
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError:
        return          # there already, or the folder is not ours to write: nothing is lost but the convenience
    with os.fdopen(fd, "w") as out:
        out.write("# made by infra: its local cloud (token, TLS key, state) is never committed\n*\n")


def private_subdir(state_dir: Path, name: str) -> Path:
    """A directory infra keeps inside the state directory (bin, blobs, jobs): made 0700 if absent, refused as
    private_state_dir refuses when it is a link, another user's or writable by others."""
    path = Path(state_dir) / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    _check_private_dir(path, os.lstat(path))
    return path


def refuse_link(path: Path) -> None:
    """Refuse (DiagnosticError) a state file that is a symbolic link; a missing file is fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise _untrusted(f"{path} is a symbolic link (to {os.readlink(path)}): infra follows no link in its local "
                         "state", f"remove the link: rm {shlex.quote(str(path))}")


def private_key_file(path: Path, size: int = 32) -> bytes:
    """The random key kept in `path` (`size` bytes), made on first use, mode 0600, atomically (two first runs
    agree on one key: link() fails for the second, which reads the first's). Its folder is trusted as
    private_state_dir trusts one; the file must be a regular file of this user that nobody else may read
    (DiagnosticError local.state-untrusted otherwise, naming the fix)."""
    path = Path(path)
    private_state_dir(path.parent)
    try:
        return _read_private_key(path, size)
    except FileNotFoundError:
        pass
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(os.urandom(size))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)
    return _read_private_key(path, size)


def _read_private_key(path: Path, size: int) -> bytes:
    quoted = shlex.quote(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise _untrusted(f"{path} is a symbolic link: infra follows no link in its state", f"rm {quoted}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise _untrusted(f"{path} must be a regular file of this user that only it may read (it is "
                             f"{stat.filemode(info.st_mode)}, owned by {_owner(info.st_uid)})",
                             f"delete it (rm {quoted}): a new key is made on the next run")
        key = handle.read(size + 1)
    if len(key) != size:
        raise _untrusted(f"{path} holds no key of {size} bytes", f"delete it (rm {quoted}): a new key is made on "
                         "the next run")
    return key


def write_private_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with a new file of `data` (mode `mode`), atomically: written to a fresh file (O_EXCL,
    O_NOFOLLOW) beside it, then renamed over it, so a link at `path` is replaced, never written through."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_private_beneath(root: Path, path: Path, data: bytes, mode: int = 0o600) -> None:
    """Local state (private, unlike write_beneath's outputs): write `data` to `path`, a file below `root`, reached
    through no symbolic link (open_beneath; the folders on
    the way are made 0700): a link planted at the file or at any folder below `root` raises OSError."""
    relative = Path(path).relative_to(root).as_posix()
    fd = open_beneath(Path(root), relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, make_dirs=True)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), mode)
        out.write(data)
