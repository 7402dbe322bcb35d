"""Who may drive the emulator: the holder of DIR/token, and nobody else.

Jobs the emulator accepts run commands as its user, and its blob endpoint writes files, so every endpoint
(ARM, Azure ML data plane, discovery, blobs) refuses a request that does not prove it read DIR/token:
 - a bearer token equal to the token (the Azure SDKs send it from the credential `--local` builds), or
 - on the blob endpoint, a SAS signature the emulator issued (an HMAC of the container, or of one blob for
   read-only links, keyed by the token), as Azure ML hands out for code upload and job logs.

The workspace's discovery link, which azure-ai-ml fetches without a credential, carries a signature too
(`signed_link`), handed out only in the workspace body that the token's holder reads.

The token is random (secrets.token_urlsafe) and written mode 0600 the first time an emulator starts over a
state directory, as Jupyter's server token. It is kept across restarts, so an `infra emulator serve` and the
in-process emulators of `--local` commands sharing that directory all accept the one token their clients
read; delete the file to rotate it.
"""

from __future__ import annotations

import calendar
import errno
import hashlib
import hmac
import os
import secrets
import stat
import time
from pathlib import Path
from urllib.parse import quote

from infra_cli.private_state import private_state_dir

TOKEN_FILE = "token"
_TOKEN_BYTES = 32
# Read-only on any blob of a container it names: what Azure ML's job-log links allow.
READ = "r"
# What a code-upload SAS allows on its container: read, create, write, list.
UPLOAD = "rcwl"
# How long a SAS the emulator issues is honoured (its `se`, checked as Azure Storage checks it:
# https://learn.microsoft.com/rest/api/storageservices/create-service-sas#specify-the-signature-validity-interval).
# Azure ML's job-log and code-upload links live hours; a client asks again for a fresh one (the job's details).
SAS_LIFETIME_S = 4 * 3600
_SE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class TokenFileError(OSError):
    """DIR/token exists but cannot be trusted (not a regular file of ours, or readable by others)."""


def token_path(state_dir: Path) -> Path:
    return Path(state_dir) / TOKEN_FILE


def ensure_token(state_dir: Path) -> str:
    """The state directory's token, made (mode 0600, atomically) if there is none yet."""
    path = token_path(state_dir)
    try:
        return read_token(state_dir)
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    temporary = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    try:
        # link() fails if another process made the token meanwhile: then both use the one that won.
        os.link(temporary, path)
    except FileExistsError:
        return read_token(state_dir)
    finally:
        temporary.unlink(missing_ok=True)
    return token


def read_token(state_dir: Path) -> str:
    """The token a client presents; FileNotFoundError if the emulator never started over state_dir."""
    path = token_path(private_state_dir(state_dir, create=False))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise TokenFileError(f"{path} is a symbolic link: infra follows no link in its state directory; "
                             "delete it to make a new token") from None
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise TokenFileError(f"{path} must be a regular file owned by this user with mode 0600 "
                                 f"(it is {stat.filemode(info.st_mode)}); delete it to make a new token")
        token = handle.read(1024).strip()
    if len(token) < 16:
        raise TokenFileError(f"{path} holds no usable token; delete it to make a new one")
    return token


def bearer_ok(headers: dict[str, str], token: str) -> bool:
    """True if the (lower-cased) headers carry `Authorization: Bearer <token>`."""
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())


def sas_signature(token: str, container: str, blob: str | None, permissions: str, expiry: str) -> str:
    """The signature of a SAS for a container (blob None) or one blob, with its permissions and expiry (`se`)."""
    resource = f"{permissions}\n{expiry}\n{container}\n{blob if blob is not None else ''}"
    return hmac.new(token.encode(), resource.encode(), hashlib.sha256).hexdigest()


def sas_query(token: str, container: str, blob: str | None = None, permissions: str = READ,
              expiry: float | None = None) -> str:
    """The query string of a SAS the blob endpoint will honour (sr=c for a container, sr=b for one blob) until
    `expiry` (a Unix time; default SAS_LIFETIME_S from now), written as Azure writes `se` (ISO 8601, UTC)."""
    kind = "c" if blob is None else "b"
    when = time.time() + SAS_LIFETIME_S if expiry is None else expiry
    se = time.strftime(_SE_FORMAT, time.gmtime(when))
    return (f"sv=2021-08-06&sr={kind}&sp={permissions}&se={quote(se, safe='')}"
            f"&sig={sas_signature(token, container, blob, permissions, se)}")


def _sas_expired(se: str) -> bool:
    try:
        expiry = calendar.timegm(time.strptime(se, _SE_FORMAT))
    except ValueError:
        return True     # no expiry, or one the emulator never writes: not a SAS it issued
    return time.time() >= expiry


def sas_allows(query: dict[str, str], token: str, method: str, container: str, blob: str | None) -> bool:
    """True if the request's SAS was issued by this emulator, has not expired, and covers this method on this
    resource."""
    signature, permissions, kind = query.get("sig", ""), query.get("sp", ""), query.get("sr", "")
    expiry = query.get("se", "")
    if not signature or not permissions or _sas_expired(expiry):
        return False
    if kind == "b":
        signed_blob = blob
        if blob is None:
            return False
    elif kind == "c":
        signed_blob = None
    else:
        return False
    expected = sas_signature(token, container, signed_blob, permissions, expiry)
    if not hmac.compare_digest(signature.encode(), expected.encode()):
        return False
    needed = {"GET": "r", "HEAD": "r", "PUT": "w", "DELETE": "d"}.get(method)
    if needed is None or needed not in permissions:
        return False
    # Listing a container needs 'l'; creating it needs 'c'.
    if blob is None and method == "GET" and "l" not in permissions:
        return False
    return True


def signed_link_query(token: str, purpose: str, subject: str) -> str:
    """The query string that makes a link for `purpose` (e.g. "discovery") of `subject` valid without a token."""
    signature = hmac.new(token.encode(), f"{purpose}\n{subject}".encode(), hashlib.sha256).hexdigest()
    return f"sig={signature}"


def signed_link_allows(query: dict[str, str], token: str, purpose: str, subject: str) -> bool:
    expected = signed_link_query(token, purpose, subject).removeprefix("sig=")
    return hmac.compare_digest(query.get("sig", "").encode(), expected.encode())
