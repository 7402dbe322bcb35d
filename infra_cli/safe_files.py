"""Files read and written below a folder through no symbolic link: every directory on the way opened with
O_NOFOLLOW relative to the one before, the file itself too; a file written to a fresh name beside its place and
renamed over it (a link planted there is replaced, never written through), and removed only while it is still
what was written. The local state's own files are infra_cli/private_state.py's."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

def _relative_parts(root: Path, relative: str) -> list[str]:
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ValueError(f"{relative!r} is not a relative path below {root}")
    return parts


def _open_dir_beneath(root: Path, parts: list[str], *, make_dirs: bool, dir_mode: int) -> int:
    """A descriptor of root/parts... (directories), each opened with O_NOFOLLOW relative to the one before."""
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts:
            if make_dirs:
                try:
                    os.mkdir(part, dir_mode, dir_fd=dir_fd)
                except FileExistsError:
                    pass
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


def open_beneath(root: Path, relative: str, flags: int, mode: int = 0o600, *, make_dirs: bool = False,
                 dir_mode: int = 0o700) -> int:
    """A file descriptor for root/relative reached through no symbolic link: every directory on the way is opened
    with O_NOFOLLOW relative to the one before (made `dir_mode`, 0700, when make_dirs), and the file itself with
    O_NOFOLLOW. A link planted anywhere below `root` raises OSError (ELOOP or ENOTDIR) instead of being followed."""
    parts = _relative_parts(root, relative)
    dir_fd = _open_dir_beneath(root, parts[:-1], make_dirs=make_dirs, dir_mode=dir_mode)
    try:
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


# ---- files a command writes into a folder the user named (infra render --out) --------------------------------

@dataclass(frozen=True)
class OutputFile:
    """A file to write below an output folder: `text`, or a copy of the regular file `source` (its mode no
    wider than the source's, as copy_no_wider)."""
    relative: str            # '/'-separated, below the output folder
    text: str | None = None
    source: Path | None = None
    # the stack paths whose sensitive values the file holds in clear (`infra render --write-secrets`): written 0600
    secrets: tuple = ()


def link_on_the_way(root: Path, relative: str) -> str | None:
    """Why root/relative cannot be written without following a link: the first directory on the way that is a
    symbolic link or not a directory, or the file's own place holding a directory; None when nothing is in the
    way (missing directories are made). A link at the file's own place is no obstacle: it is replaced, not
    followed (write_beneath)."""
    parts = _relative_parts(root, relative)
    here = Path(root)
    for i, part in enumerate(parts):
        here = here / part
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return f"{here.parent} is not a directory"
        last = i == len(parts) - 1
        if stat.S_ISLNK(info.st_mode) and not last:
            return f"{here} is a symbolic link (to {os.readlink(here)})"
        if not last and not stat.S_ISDIR(info.st_mode):
            return f"{here} is not a directory"
        if last and stat.S_ISDIR(info.st_mode):
            return f"{here} is a directory"
    return None


def write_beneath(root: Path, output: OutputFile) -> str:
    """Write `output` below `root` through no symbolic link (directories made as needed, mode 0777 less the
    umask) and return the sha256 of what was written. The content goes to a fresh file (O_EXCL, O_NOFOLLOW)
    beside its place and is renamed over it, so a link planted at the place is replaced, never written through,
    and a reader never sees half a file. A file that holds secrets (`output.secrets`) is mode 0600."""
    parts = _relative_parts(root, output.relative)
    dir_fd = _open_dir_beneath(root, parts[:-1], make_dirs=True, dir_mode=0o777)
    temporary = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    digest = hashlib.sha256()
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as out:
                if output.source is not None:
                    with open(output.source, "rb") as src:
                        os.fchmod(out.fileno(), stat.S_IMODE(os.fstat(src.fileno()).st_mode) & 0o777)
                        while chunk := src.read(1 << 20):
                            digest.update(chunk)
                            out.write(chunk)
                else:
                    data = (output.text or "").encode("utf-8")
                    digest.update(data)
                    out.write(data)
                if output.secrets:
                    os.fchmod(out.fileno(), 0o600)
            os.replace(temporary, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dir_fd)
    return digest.hexdigest()


def read_beneath(root: Path, relative: str, limit: int) -> bytes | None:
    """The bytes of root/relative reached through no link (at most `limit`), or None when it is missing, a
    link, or not a regular file."""
    try:
        fd = open_beneath(root, relative, os.O_RDONLY)
    except (OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read(limit)


def remove_beneath(root: Path, relative: str, sha256: str) -> str:
    """Remove root/relative, reached through no link, only if it is still the regular file whose content hashes
    to `sha256` (the file this tool wrote there), then its directories that are left empty. Returns "removed",
    "gone" (nothing there) or "changed" (a link, a directory or other content now: left alone)."""
    try:
        parts = _relative_parts(root, relative)
        dir_fd = _open_dir_beneath(root, parts[:-1], make_dirs=False, dir_mode=0o777)
    except (OSError, ValueError) as exc:
        return "gone" if isinstance(exc, FileNotFoundError) else "changed"
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            return "gone"
        except OSError:
            return "changed"    # a link (ELOOP)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return "changed"
            digest = hashlib.sha256()
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        if digest.hexdigest() != sha256:
            return "changed"
        os.unlink(parts[-1], dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    for depth in range(len(parts) - 1, 0, -1):   # the directories on the way, deepest first, while empty
        try:
            parent = _open_dir_beneath(root, parts[:depth - 1], make_dirs=False, dir_mode=0o777)
        except OSError:
            break
        try:
            os.rmdir(parts[depth - 1], dir_fd=parent)
        except OSError:
            break
        finally:
            os.close(parent)
    return "removed"
