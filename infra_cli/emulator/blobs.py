"""The emulator's own blob endpoint (path-style, like Azurite: /devstoreaccount1/CONTAINER/BLOB).

Serves what azure-storage-blob needs for code upload and for job logs and outputs: container create and
list, blob PUT (whole, or blocks plus a block list), HEAD, ranged GET, metadata and DELETE. Bytes live in
files under STATE/blobs/, metadata in SQLite. Requests must carry the emulator's token or a SAS it issued
(emulator/auth.py, checked by the server before a request gets here). Container and blob names are held to
Azure's naming rules before they touch the file system, so no name reaches outside STATE/blobs/.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import re
import shutil
import stat
import time
import uuid
from email.utils import formatdate
from pathlib import Path
from urllib.parse import quote
from xml.etree import ElementTree

from infra_cli.emulator import auth
from infra_cli.emulator.state import Store
from infra_cli.emulator.wire import Request, Response
from infra_cli.private_state import private_subdir
from infra_cli.safe_files import open_beneath

def escape(text: str) -> str:
    """&, < and > as XML entities (xml.sax.saxutils.escape, whose import brings urllib.request to every start)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


ACCOUNT = "devstoreaccount1"
_STORAGE_VERSION = "2021-08-06"
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
# Azure's rules: 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit
# (https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata).
_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")
_BLOB_NAME_MAX = 1024


class BlobError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self, method: str) -> Response:
        body = b"" if method == "HEAD" else (
            f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{self.code}</Code>'
            f"<Message>{escape(self.message)}</Message></Error>").encode()
        return Response(self.status, body, {"Content-Type": "application/xml", "x-ms-error-code": self.code,
                                            **_common_headers()})


def check_container_name(container: str) -> str:
    if not _CONTAINER.fullmatch(container):
        raise BlobError(400, "InvalidResourceName",
                        f"The container name {container[:80]!r} is not valid: 3-63 lower-case letters, digits "
                        "and single hyphens.")
    return container


class BlobStore:
    def __init__(self, store: Store, root: Path, token: str):
        self._store = store
        self.root = private_subdir(root.parent, root.name)   # STATE/blobs: ours, and no link followed below it
        self._token = token

    def container_dir(self, container: str) -> Path:
        return self.root / check_container_name(container)

    def path(self, container: str, name: str) -> Path:
        parts = name.split("/")
        if (not name or len(name) > _BLOB_NAME_MAX or any(p in ("", ".", "..") for p in parts)
                or any(ord(c) < 0x20 or c == "\\" for c in name)):
            raise BlobError(400, "InvalidResourceName", f"The blob name {name[:80]!r} is not valid.")
        return self.container_dir(container) / Path(*parts)

    def sas_url(self, base_url: str, container: str, name: str | None = None, permissions: str = auth.READ) -> str:
        """A link to a container (name None) or one blob that this endpoint honours without a bearer token."""
        return f"{blob_url(base_url, container, name or '')}?{auth.sas_query(self._token, container, name, permissions)}"

    def _open(self, relative: str, flags: int) -> int:
        """A blob's file (or a block's) below the root, reached through no symbolic link (safe_files.open_beneath)."""
        try:
            return open_beneath(self.root, relative, flags, 0o600, make_dirs=bool(flags & os.O_CREAT))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise BlobError(409, "InvalidBlobPath", "A link or a file stands where the emulator keeps this "
                                                        "blob; it follows no link in its state.") from None
            raise

    def _write_file(self, relative: str, data: bytes) -> None:
        with os.fdopen(self._open(relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
            out.write(data)

    def _read_file(self, relative: str) -> bytes | None:
        try:
            fd = self._open(relative, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def _unlink(self, relative: str) -> None:
        folder, _, leaf = relative.rpartition("/")
        try:
            fd = self._open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return
        try:
            os.unlink(leaf, dir_fd=fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def _relative(self, container: str, name: str) -> str:
        self.path(container, name)      # held to Azure's naming rules
        return f"{container}/{name}"

    def write(self, container: str, name: str, data: bytes, metadata: dict[str, str] | None = None,
              content_type: str | None = None) -> str:
        self._write_file(self._relative(container, name), data)
        return self.register(container, name, metadata or {}, content_type)

    def register(self, container: str, name: str, metadata: dict[str, str] | None = None,
                 content_type: str | None = None) -> str:
        """Record a blob whose file is (or will be) written in place, e.g. a log a job appends to (its file is
        made here, empty, so the job's writer opens a file of ours, not a link)."""
        os.close(self._open(self._relative(container, name), os.O_WRONLY | os.O_CREAT))
        etag = f'"0x{uuid.uuid4().hex[:16].upper()}"'
        self._store.put_blob(container, name, metadata or {}, content_type, etag)
        return etag

    def read(self, container: str, name: str) -> bytes | None:
        if self._store.blob(container, name) is None:
            return None
        return self._read_file(self._relative(container, name)) or b""

    def names(self, container: str, prefix: str = "") -> list[str]:
        return self._store.blob_names(container, prefix)

    # the HTTP side
    def handle(self, req: Request, container: str, blob: str | None) -> Response:
        try:
            if blob is None:
                return self._container(req, container)
            return self._blob(req, container, blob)
        except BlobError as exc:
            return exc.response(req.method)

    def _container(self, req: Request, container: str) -> Response:
        comp = req.query.get("comp")
        if req.method == "PUT" and comp is None:
            self.container_dir(container).mkdir(mode=0o700, exist_ok=True)
            return Response(201, b"", {"ETag": '"0x1"', **_common_headers()})
        if req.method == "GET" and comp == "list":
            return self._list(req, container)
        if req.method in ("GET", "HEAD") and comp is None:
            if not self.container_dir(container).exists() and not self.names(container):
                raise BlobError(404, "ContainerNotFound", "The specified container does not exist.")
            return Response(200, b"", {"ETag": '"0x1"', "Last-Modified": formatdate(usegmt=True),
                                       **_common_headers()})
        raise BlobError(400, "UnsupportedHttpVerb", f"{req.method} with comp={comp} is not emulated.")

    def _list(self, req: Request, container: str) -> Response:
        prefix = req.query.get("prefix", "")
        delimiter = req.query.get("delimiter")
        names = self.names(container, prefix)
        marker = req.query.get("marker")
        if marker:
            names = [n for n in names if n >= marker]
        max_results = int(req.query.get("maxresults") or 5000)
        page, rest = names[:max_results], names[max_results:]
        items, prefixes = [], []
        for name in page:
            if delimiter and delimiter in name[len(prefix):]:
                sub = name[: len(prefix) + name[len(prefix):].index(delimiter) + len(delimiter)]
                if sub not in prefixes:
                    prefixes.append(sub)
                continue
            meta = self._store.blob(container, name) or {}
            size = _size(self.path(container, name))     # lstat: a link's target is never read
            metadata = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in (meta.get("metadata") or {}).items())
            items.append(
                f"<Blob><Name>{escape(name)}</Name><Properties>"
                f"<Last-Modified>{formatdate(meta.get('modified', time.time()), usegmt=True)}</Last-Modified>"
                f"<Etag>{meta.get('etag', '')}</Etag><Content-Length>{size}</Content-Length>"
                f"<Content-Type>{escape(meta.get('content_type') or 'application/octet-stream')}</Content-Type>"
                f"<BlobType>BlockBlob</BlobType><LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState>"
                f"</Properties>" + (f"<Metadata>{metadata}</Metadata>" if "metadata" in req.query.get("include", "")
                                    else "") + "</Blob>")
        items += [f"<BlobPrefix><Name>{escape(p)}</Name></BlobPrefix>" for p in prefixes]
        xml = (f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="/{ACCOUNT}" '
               f'ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix>'
               f"<MaxResults>{max_results}</MaxResults><Blobs>{''.join(items)}</Blobs>"
               f"<NextMarker>{escape(rest[0]) if rest else ''}</NextMarker></EnumerationResults>")
        return Response(200, xml.encode(), {"Content-Type": "application/xml", **_common_headers()})

    def _blob(self, req: Request, container: str, name: str) -> Response:
        comp = req.query.get("comp")
        if req.method == "PUT":
            if comp == "block":
                return self._put_block(req, container, name)
            if comp == "blocklist":
                return self._put_block_list(req, container, name)
            if comp == "metadata":
                return self._put_metadata(req, container, name)
            if comp is None:
                etag = self.write(container, name, req.body, _metadata(req), req.headers.get("x-ms-blob-content-type"))
                return _written(etag, req.body)
        if req.method in ("GET", "HEAD") and comp is None:
            return self._get(req, container, name)
        if req.method == "DELETE":
            self._existing(container, name)
            self._store.delete_blob(container, name)
            self._unlink(self._relative(container, name))
            return Response(202, b"", _common_headers())
        raise BlobError(400, "UnsupportedHttpVerb", f"{req.method} with comp={comp} is not emulated.")

    def _existing(self, container: str, name: str) -> dict:
        meta = self._store.blob(container, name)
        if meta is None:
            raise BlobError(404, "BlobNotFound", "The specified blob does not exist.")
        return meta

    def _get(self, req: Request, container: str, name: str) -> Response:
        meta = self._existing(container, name)
        data = self._read_file(self._relative(container, name)) or b""
        headers = {"ETag": meta["etag"], "Last-Modified": formatdate(meta["modified"], usegmt=True),
                   "x-ms-blob-type": "BlockBlob", "Accept-Ranges": "bytes",
                   "Content-Type": meta.get("content_type") or "application/octet-stream",
                   **{f"x-ms-meta-{k}": v for k, v in meta["metadata"].items()}, **_common_headers()}
        wanted = req.headers.get("x-ms-range") or req.headers.get("range")
        match = _RANGE.fullmatch(wanted or "")
        if match:
            start = int(match.group(1))
            if start >= len(data):
                raise BlobError(416, "InvalidRange", "The range specified is invalid for the current size of the resource.")
            end = min(int(match.group(2)) if match.group(2) else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return Response(206, data[start:end + 1], headers)
        return Response(200, data, headers)

    def _put_metadata(self, req: Request, container: str, name: str) -> Response:
        meta = self._existing(container, name)
        self._store.put_blob(container, name, _metadata(req), meta.get("content_type"), meta["etag"])
        return Response(200, b"", {"ETag": meta["etag"], **_common_headers()})

    def _blocks_dir(self, container: str, name: str) -> str:
        return f".blocks/{check_container_name(container)}/{hashlib.sha256(name.encode()).hexdigest()}"

    def _put_block(self, req: Request, container: str, name: str) -> Response:
        block_id = req.query.get("blockid", "")
        self._write_file(f"{self._blocks_dir(container, name)}/{hashlib.sha256(block_id.encode()).hexdigest()}",
                         req.body)
        return Response(201, b"", _common_headers())

    def _put_block_list(self, req: Request, container: str, name: str) -> Response:
        directory = self._blocks_dir(container, name)
        try:
            ids = [el.text or "" for el in ElementTree.fromstring(req.body)]
        except ElementTree.ParseError as exc:
            raise BlobError(400, "InvalidXmlDocument", f"The block list is not valid XML: {exc}")
        chunks = []
        for block_id in ids:
            part = self._read_file(f"{directory}/{hashlib.sha256(block_id.encode()).hexdigest()}")
            if part is None:
                raise BlobError(400, "InvalidBlockList", "The specified block list is invalid.")
            chunks.append(part)
        data = b"".join(chunks)
        etag = self.write(container, name, data, _metadata(req), req.headers.get("x-ms-blob-content-type"))
        shutil.rmtree(self.root / directory, ignore_errors=True)
        return _written(etag, data)


def blob_url(base_url: str, container: str, name: str = "") -> str:
    return f"{base_url}{ACCOUNT}/{quote(container)}" + (f"/{quote(name)}" if name else "")


def _metadata(req: Request) -> dict[str, str]:
    return {k[len("x-ms-meta-"):]: v for k, v in req.headers.items() if k.startswith("x-ms-meta-")}


def _written(etag: str, data: bytes) -> Response:
    return Response(201, b"", {"ETag": etag, "Last-Modified": formatdate(usegmt=True),
                               "Content-MD5": base64.b64encode(hashlib.md5(data).digest()).decode(),
                               "x-ms-request-server-encrypted": "true", **_common_headers()})


def _common_headers() -> dict[str, str]:
    return {"x-ms-version": _STORAGE_VERSION, "x-ms-request-id": str(uuid.uuid4())}


def _size(path: Path) -> int:
    try:
        info = path.lstat()
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0
