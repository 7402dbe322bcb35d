"""Where the project's data lives: the knowledge in validators/ and the Jinja2 templates in templates/.

Both sit at the top of the repository (the design card fixes the layout). A built wheel or sdist carries them
inside the package, as infra_cli/_shipped/validators and infra_cli/_shipped/templates (package data mapped from
the top-level folders by pyproject.toml); a checkout (editable install, or run in place) reads the top-level
folders themselves. INFRA_VALIDATORS_DIR and INFRA_TEMPLATES_DIR point elsewhere, e.g. at a user's extended
catalog.
"""

from __future__ import annotations

import errno
import importlib.util
import sys
import functools
import hashlib
import os
import pwd
import shlex
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from infra_cli.diagnostics import Diagnostic, DiagnosticError

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
SHIPPED = "_shipped"   # the package-data folder of an installed distribution (pyproject.toml's package-dir)


@functools.lru_cache(maxsize=None)
def shipped_data_dir(name: str) -> Path:
    """validators/ or templates/ as this installation has them: inside the installed package, else the checkout's
    top-level folder (a checkout holds pyproject.toml beside the package; site-packages does not, and a
    `validators` folder there is the PyPI package of that name, never infra's catalog)."""
    # a path beside this module rather than importlib.resources (its import costs every command ~8 ms): a wheel
    # installs onto the file system, and Jinja2's loader and the catalog readers need real paths anyway
    installed = PACKAGE_DIR / SHIPPED / name
    if installed.is_dir():
        return installed
    return PROJECT_ROOT / name if (PROJECT_ROOT / "pyproject.toml").is_file() else installed


def validators_dir() -> Path:
    return Path(os.environ.get("INFRA_VALIDATORS_DIR") or shipped_data_dir("validators"))


def templates_dir() -> Path:
    return Path(os.environ.get("INFRA_TEMPLATES_DIR") or shipped_data_dir("templates"))


LOCAL_STATE_MARKERS = (".infra", ".git")   # what makes a folder a project for `--local`'s cloud


def local_project(anchor: Path | None = None) -> Path:
    """The project whose local cloud `--local` uses: the nearest folder at or above the stack's own folder (or the
    current directory, without a stack) that holds `.infra/` or `.git`, else that folder itself. So
    `infra plan stacks/x.yaml` from the repository root and `infra plan x.yaml` from stacks/ see one cloud."""
    start = Path.cwd() if anchor is None else Path(anchor).absolute()
    if anchor is not None and not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in LOCAL_STATE_MARKERS):
            return directory
    return start


def local_state_dir(anchor: Path | None = None) -> Path:
    """Where `--local` keeps the emulated cloud: INFRA_LOCAL_DIR, else the project's .infra/local (local_project;
    see README "Local Azure")."""
    explicit = os.environ.get("INFRA_LOCAL_DIR")
    return Path(explicit) if explicit else local_project(anchor) / ".infra" / "local"


# ---- files a stack names: inside its project, never through a symlink out of it --------------------------
# Build contexts, conda files and code resolve inside the stack's project (the git work tree that
# holds the stack, else the stack's directory); a context's symlinks are never followed out of it.

AZUREML_IGNORE_FILES = (".amlignore", ".gitignore")  # the first that exists at the context's top counts


def project_root(stack_file: Path) -> Path:
    """The git work tree holding the stack file (a `.git` directory or file), else the stack's directory."""
    start = Path(stack_file).resolve().parent
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def inside(path: Path, root: Path) -> bool:
    """Whether `path`, with every symlink resolved, lies in `root` (resolved)."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except ValueError:   # a NUL in the path (a Dockerfile's COPY source, say): no file has that name, anywhere
        return False


@dataclass(frozen=True)
class ContextFile:
    source: Path    # the regular file to read (a symlink's target, when the link stays inside the context)
    relative: str   # where it goes in the upload, with '/' separators


@dataclass(frozen=True)
class ContextListing:
    files: list[ContextFile]
    skipped: list[str]  # "PATH -> TARGET (why)": links out of the context, links to directories, FIFOs...


@functools.lru_cache(maxsize=1)
def _azureml_wildmatch():
    """azure-ai-ml's own gitignore matcher (azure/ai/ml/_utils/_pathspec.py, standard library only), loaded
    from its file without importing azure.ai.ml (offline commands import no azure module): the very rules
    Azure ML applies to .amlignore. None when azure-ai-ml is not installed."""
    # found on sys.path as a file: importing azure (even its namespace packages) is what offline commands avoid
    source = next((c for c in (Path(e or ".") / "azure" / "ai" / "ml" / "_utils" / "_pathspec.py" for e in sys.path)
                   if c.is_file()), None)
    loader_spec = importlib.util.spec_from_file_location("infra_cli._azureml_pathspec", source) if source else None
    if loader_spec is None:
        return None
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[loader_spec.name] = module  # its dataclasses look their module up there
    loader_spec.loader.exec_module(module)
    return module


class _IgnoreRules:
    """gitignore-style lines matched as azure-ai-ml's IgnoreFile.is_file_excluded does: the last pattern
    that matches a relative path decides (a `!pattern` brings a file back)."""

    def __init__(self, lines: list[str]):
        wildmatch = _azureml_wildmatch()
        if wildmatch is None:
            raise RuntimeError("azure-ai-ml is not installed: it provides the .amlignore matcher")
        self._normalize = wildmatch.normalize_file
        self._patterns = [p for p in (wildmatch.GitWildMatchPattern(line) for line in lines) if p.include is not None]
        self.negates = any(not p.include for p in self._patterns)

    def excluded(self, relative: str) -> bool:
        path = self._normalize(relative)
        matched = False
        for pattern in self._patterns:
            if pattern.match_file(path) is not None:
                matched = pattern.include
        return matched


def _ignore_rules(root: Path) -> _IgnoreRules | None:
    """The context's ignore rules as Azure ML finds them: .amlignore, else .gitignore, at the top only
    (azure-ai-ml's get_ignore_file)."""
    for name in AZUREML_IGNORE_FILES:
        path = root / name
        if path.is_file() and inside(path, root):
            with open(path, encoding="utf-8", errors="replace") as fh:
                return _IgnoreRules([line.rstrip() for line in fh if line])
    return None


def context_files(root: Path) -> ContextListing:
    """The files of a build or code context that are uploaded: what the ignore file keeps, regular files only,
    symlinks only when they resolve to a regular file inside the context. Directory symlinks are not entered
    (`loop -> .` would recurse forever, `out -> /etc` leaves the context). Sorted by relative path."""
    root = Path(root)
    real_root = root.resolve()
    rules = _ignore_rules(root)
    files: list[ContextFile] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        kept_dirs = []
        for d in sorted(dirnames):
            rel = prefix + d
            if rules is not None and not rules.negates and rules.excluded(rel + "/"):
                continue  # ignored as a whole (no `!pattern` can bring a file back)
            if (here / d).is_symlink():
                skipped.append(f"{rel} -> {os.readlink(here / d)} (a link to a directory is not followed)")
                continue
            kept_dirs.append(d)
        dirnames[:] = kept_dirs
        for name in sorted(filenames):
            rel = prefix + name
            if rules is not None and rules.excluded(rel):
                continue
            path = here / name
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(real_root):
                    skipped.append(f"{rel} -> {os.readlink(path)} (outside the context)")
                    continue
                if not target.is_file():
                    skipped.append(f"{rel} -> {os.readlink(path)} (not a regular file)")
                    continue
                files.append(ContextFile(target, rel))
            elif stat.S_ISREG(path.lstat().st_mode):
                files.append(ContextFile(path, rel))
            else:
                skipped.append(f"{rel} (not a regular file)")
    files.sort(key=lambda f: f.relative)
    return ContextListing(files, skipped)


def copy_no_wider(source: Path, destination: Path) -> None:
    """Copy a regular file; the copy's mode is the source's permission bits, never wider (a 0600 key stays
    0600), and an existing symlink at the destination is replaced, not followed."""
    mode = stat.S_IMODE(os.stat(source).st_mode) & 0o777
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.is_symlink():
        destination.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with open(source, "rb") as src, os.fdopen(os.open(destination, flags, 0o600), "wb") as dst:
        os.fchmod(dst.fileno(), mode)
        shutil.copyfileobj(src, dst, 1 << 20)


def stage_context(root: Path, destination: Path) -> ContextListing:
    """Copy what `context_files` keeps into `destination` (a fresh directory), the ignore file included,
    so an uploader that walks `destination` sees only that."""
    listing = context_files(root)
    destination.mkdir(parents=True, exist_ok=True)
    for f in listing.files:
        copy_no_wider(f.source, destination / f.relative)
    return listing


# ---- local state: trusted only as OpenSSH trusts its files --------------------------------------------------
# `--local` keeps a cloud in a directory (tokens, keys, a job runner's shims): a directory someone else owns or
# may write is refused, as OpenSSH's StrictModes refuses ~/.ssh (https://man.openbsd.org/sshd_config#StrictModes),
# and no symbolic link inside it is ever followed.

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


def user_state_dir() -> Path:
    """What infra keeps for the user rather than for a project (render's manifest key): $XDG_STATE_HOME/infra,
    else ~/.local/state/infra (https://specifications.freedesktop.org/basedir-spec/latest/)."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not Path(base).is_absolute():   # a relative XDG_STATE_HOME is invalid by the spec
        base = str(Path.home() / ".local" / "state")
    return Path(base) / "infra"


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


def write_private_beneath(root: Path, path: Path, data: bytes, mode: int = 0o600) -> None:
    """Local state (private, unlike write_beneath's outputs): write `data` to `path`, a file below `root`, reached
    through no symbolic link (open_beneath; the folders on
    the way are made 0700): a link planted at the file or at any folder below `root` raises OSError."""
    relative = Path(path).relative_to(root).as_posix()
    fd = open_beneath(Path(root), relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, make_dirs=True)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), mode)
        out.write(data)
