"""The emulator's TLS identity: a self-signed certificate for 127.0.0.1 and localhost.

azure-core refuses bearer tokens over plain http, so the emulator speaks HTTPS; clients trust DIR/cert.pem.
The pair is reused across restarts (clients may have pinned the file) and regenerated when it expires.
The expiry is written beside the pair (cert.expiry, the certificate's notAfter as a Unix time) when it is made, so
a start reads one number instead of importing cryptography (~0.15 s) to parse the certificate; a missing, unreadable
or passed expiry regenerates the pair.

One pair per directory, whatever runs at once: the pair is made under an exclusive lock (DIR/cert.lock, flock), and
looked at again once the lock is had, so two first runs over a fresh directory use the pair the first one made.
Without it each made its own, and a client trusting DIR/cert.pem met the other's certificate
(CERTIFICATE_VERIFY_FAILED: self-signed certificate). A complete pair is read without the lock: the expiry is
written last, and a pair being renewed has an expiry that sends every reader to the lock.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import ipaddress
import os
import stat
import time
import uuid
from pathlib import Path

from infra_cli.private_state import write_private_file

CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
EXPIRY_FILE = "cert.expiry"
LOCK_FILE = "cert.lock"
_VALID_DAYS = 365
_RENEW_BEFORE_S = 86400  # renewed a day ahead, so a long run does not outlive its certificate


def ensure_certificate(state_dir: Path) -> tuple[Path, Path]:
    """Return (cert_path, key_path) under state_dir, creating or renewing them if needed."""
    cert_path, key_path = state_dir / CERT_FILE, state_dir / KEY_FILE
    if _usable(state_dir):
        return cert_path, key_path
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not _usable(state_dir):     # another process may have made it while this one waited
            _write_self_signed(cert_path, key_path, state_dir / EXPIRY_FILE)
    finally:
        os.close(fd)                   # closing drops the lock
    return cert_path, key_path


def _usable(state_dir: Path) -> bool:
    return (_own_file(state_dir / CERT_FILE) and _own_file(state_dir / KEY_FILE)
            and not _expires_soon(state_dir / EXPIRY_FILE))


def _own_file(path: Path) -> bool:
    """A regular file of this user, not a link (a link is replaced by a fresh pair, never followed)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()


def _expires_soon(expiry_path: Path) -> bool:
    if not _own_file(expiry_path):
        return True
    try:
        not_after = float(expiry_path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return True  # a pair from before the expiry file, or a damaged one: make a fresh pair
    return not_after - time.time() < _RENEW_BEFORE_S


def _write_self_signed(cert_path: Path, key_path: Path, expiry_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    # A distinct subject per certificate: OpenSSL finds trust anchors by subject, so two emulators' certificates
    # in one CA bundle must not share a name.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"infra local Azure emulator {uuid.uuid4().hex[:12]}")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=_VALID_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        # A CA-flagged self-signed certificate: OpenSSL accepts it as its own trust anchor.
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    # Each file replaced whole (a link in their place is replaced, not written through: private_state.write_private_file)
    write_private_file(key_path, key_bytes, 0o600)
    write_private_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    # Written last: an interrupted generation leaves no expiry, so the next start makes the pair again.
    write_private_file(expiry_path, f"{cert.not_valid_after_utc.timestamp():.0f}\n".encode("ascii"), 0o644)
