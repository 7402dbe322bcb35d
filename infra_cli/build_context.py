"""What a build or code context uploads: the files its `.amlignore` (else `.gitignore`) keeps, as azure-ai-ml's own
matcher reads it, regular files only, no symlink followed out of the context; and a staged copy of just those files
for an uploader that walks a folder itself."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from infra_cli.paths import inside

# Build contexts, conda files and code resolve inside the stack's project (paths.project_root: the git work tree
# that holds the stack, else the stack's directory); a context's symlinks are never followed out of it.
AZUREML_IGNORE_FILES = (".amlignore", ".gitignore")  # the first that exists at the context's top counts


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
