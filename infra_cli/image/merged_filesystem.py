"""The merged file system of the layers read so far, as overlayfs would show it, in three-valued logic.

Layers are read from the top down. An entry found in the layers read is final (nothing below can hide
it); a path not found there is ABSENT only once every layer has been read, UNKNOWN before. That is what
lets `infra image check` stop early and stay correct: whiteouts live in upper layers, which are read first.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import Enum

from infra_cli.image.errors import ImageReadError
from infra_cli.image.layers import LayerIndex

MAX_LINK_HOPS = 40   # as Linux's path resolution


class State(str, Enum):
    FOUND = "found"
    ABSENT = "absent"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Hit:
    state: State
    layer: LayerIndex | None = None
    kind: str = ""             # file | dir | symlink | hardlink
    path: str = ""             # the path looked up (after link resolution, the final one)


def _ancestors(path: str) -> list[str]:
    out, cur = [], posixpath.dirname(path)
    while cur not in ("/", ""):
        out.append(cur)
        cur = posixpath.dirname(cur)
    return out


class MergedView:
    def __init__(self, layers_top_down: list[LayerIndex], complete: bool):
        self.layers = layers_top_down
        self.complete = complete

    def _missing(self, path: str) -> Hit:
        return Hit(State.ABSENT if self.complete else State.UNKNOWN, path=path)

    def entry(self, path: str) -> Hit:
        """The topmost definition of `path` itself (links not followed), honouring whiteouts."""
        h = hash(path)
        ancestors = _ancestors(path)
        ancestor_hashes = [hash(a) for a in ancestors]
        for layer in self.layers:
            if h in layer.files:
                kind = "symlink" if path in layer.symlinks else "hardlink" if path in layer.hardlinks else "file"
                return Hit(State.FOUND, layer, kind, path)
            if h in layer.dirs:
                return Hit(State.FOUND, layer, "dir", path)
            if layer.whiteouts and (path in layer.whiteouts or any(a in layer.whiteouts for a in ancestors)):
                return Hit(State.ABSENT, path=path)
            if layer.opaque and any(a in layer.opaque for a in ancestors):
                return Hit(State.ABSENT, path=path)
            if any(a in layer.files for a in ancestor_hashes):   # a file or link replaced a parent directory
                return Hit(State.ABSENT, path=path)
        return self._missing(path)

    def resolve(self, path: str) -> tuple[Hit, list[str]]:
        """Follow symlinks in every component; returns the final hit and the chain of links taken."""
        chain = [path]
        parts = [p for p in path.split("/") if p]
        cur, i, hops = "/", 0, 0
        while i < len(parts):
            comp = parts[i]
            if comp == ".":
                i += 1
                continue
            if comp == "..":
                cur = posixpath.dirname(cur)
                i += 1
                continue
            nxt = posixpath.join(cur, comp)
            hit = self.entry(nxt)
            if hit.state is not State.FOUND:
                return hit, chain
            if hit.kind == "symlink":
                assert hit.layer is not None     # entry() names the layer of every FOUND hit
                hops += 1
                if hops > MAX_LINK_HOPS:
                    return Hit(State.ABSENT, path=nxt), chain
                target = hit.layer.symlinks[nxt]
                if target.startswith("/"):
                    cur = "/"
                parts = [p for p in target.split("/") if p] + parts[i + 1:]
                i = 0
                chain.append(posixpath.normpath(posixpath.join(cur, *parts)) if parts else cur)
                continue
            if hit.kind != "dir" and i < len(parts) - 1:
                return Hit(State.ABSENT, path=nxt), chain        # a file used as a directory
            cur, i = nxt, i + 1
            if i == len(parts):
                return hit, chain
        return Hit(State.FOUND, None, "dir", cur), chain

    def visible(self, layer: LayerIndex, path: str) -> State:
        """Whether the entry `path` of `layer` is the one the merged file system shows."""
        hit = self.entry(path)
        return State.FOUND if hit.state is State.FOUND and hit.layer is layer else State.ABSENT


def check_hardlinks(layers_top_down: list[LayerIndex], complete: bool, total: int) -> bool:
    """Resolve the hard links of the layers read whose targets their own layer does not hold earlier
    (`external_links`) against the layers below each: a non-directory there resolves it (and it is dropped
    from `external_links`); a directory, or nothing once every layer below is read, makes the layer unreadable,
    as extracting it fails in any runtime. Returns whether some link still waits on a layer not read yet
    (the check must not stop before those are read)."""
    pending = False
    for k, layer in enumerate(layers_top_down):
        if not layer.external_links:
            continue
        below = MergedView(layers_top_down[k + 1:], complete)
        for path, target in list(layer.external_links.items()):
            hit = below.entry(target)
            if hit.state is State.UNKNOWN:
                pending = True
            elif hit.state is State.FOUND and hit.kind != "dir":
                del layer.external_links[path]
            else:
                held = "a directory" if hit.state is State.FOUND else "which neither an earlier entry of the layer " \
                       "nor a lower layer holds"
                raise ImageReadError(
                    f"layer {layer.number} of {total} ({layer.digest}): {path} is a hard link to {target}, {held}",
                    "no runtime can extract the layer (tar links to a file already extracted); rebuild the image "
                    "from trusted sources")
    return pending
