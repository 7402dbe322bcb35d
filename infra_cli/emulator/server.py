"""The emulator's HTTPS server: loopback only, TLS with its own certificate, and only the holder of DIR/token
(or of a SAS the emulator issued, on the blob endpoint) gets an answer: see emulator/auth.py.

    with EmulatorServer(tmp_path, faults=FaultConfig(provisioning_delay_s=0.2)) as server:
        server.ensure_workspace(subscription, "rg", "ws", "eastus")
        ... point the SDKs at server.url, trusting server.cert_path ...
        server.stats.by_method()
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import stat
import socketserver
import ssl
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import DiagnosticError, says
from infra_cli.emulator import auth, routes
from infra_cli.emulator.auth import token_path
from infra_cli.emulator.blobs import BlobError
from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.faults import FaultConfig, FaultInjector
from infra_cli.emulator.ml_workspace import ensure_workspace
from infra_cli.emulator.runner import JobRunner, runner_alive, runner_identity
from infra_cli.emulator.state import move_aside
from infra_cli.emulator.stats import RequestStats
from infra_cli.emulator.tls import ensure_certificate
from infra_cli.emulator.wire import ArmError, Request, Response, json_response
from infra_cli.emulator.world import load_world
from infra_cli.diagnostics import Diagnostic
from infra_cli.private_state import private_state_dir, write_private_file

__all__ = ["EmulatorServer", "FaultConfig"]

LOOPBACK = "127.0.0.1"
log = logging.getLogger("infra.emulator")

# A connection costs a thread from its first byte to its last, so a stranger who connects and says nothing must
# not keep one for long (as a web server's client_header_timeout / keepalive_timeout,
# https://nginx.org/en/docs/http/ngx_http_core_module.html#keepalive_timeout):
HANDSHAKE_TIMEOUT_S = 5.0   # the TLS handshake must be done within it (nothing is answered before it)
IDLE_TIMEOUT_S = 10.0       # a read (the next request on a kept-alive connection, a body's next bytes) waits no longer
MAX_CONNECTIONS = 64        # at most this many threads serve connections; past it, the connection that has
                            # waited longest for a byte is closed to make room, or the newcomer when all are busy


# ---- `infra emulator serve` holds its state directory --------------------------------------------------------
# A served emulator keeps its SQLite database open for as long as it runs: moving the database aside under it
# (`infra emulator reset`) would leave it writing to the old file while every other command starts a new one
# (two clouds). Each serve records itself in DIR/serve-PID.lock (its pid and the process's start time, as the job
# runner records itself on a job, so a reused pid is not mistaken for it); reset refuses while one is alive.
SERVE_LOCK_GLOB = "serve-*.lock"
SERVED_RULE = "local.state-served"


def _serve_lock_path(state_dir: Path, pid: int) -> Path:
    return Path(state_dir) / f"serve-{pid}.lock"


def _read_serve_lock(path: Path) -> dict | None:
    """A serve's record, read through no link; None when it is not a regular file of ours or not a record."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        try:
            record = json.loads(handle.read(4096))
        except ValueError:
            return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def live_serves(state_dir: Path) -> list[dict]:
    """The `infra emulator serve` processes alive over state_dir ({pid, start, url}); a dead serve's lock (killed,
    or its pid reused by another process since) is ignored."""
    found = []
    for path in sorted(Path(state_dir).glob(SERVE_LOCK_GLOB)):
        record = _read_serve_lock(path)
        if record is not None and runner_alive(record):
            found.append(record)
    return found


# ---- every process that runs the local cloud holds its state directory ------------------------------------------
# Not only a serve: an `infra apply --local` runs its own emulator over the same database, and a reset that moved
# the database aside under it left it reporting "1 added" in a cloud no later command sees. Every emulator holds
# DIR/in-use.lock shared (flock) from before it opens the database until it stops; reset takes it exclusive without
# waiting, and refuses when it cannot. The kernel drops a killed process's flock: nothing stale is left.
IN_USE_LOCK = "in-use.lock"
IN_USE_RULE = "local.state-in-use"


def _hold_in_use(state_dir: Path) -> int:
    """A descriptor holding DIR/in-use.lock shared (waits while a reset moves the database aside)."""
    fd = os.open(Path(state_dir) / IN_USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _in_use_holders(path: Path) -> list[int]:
    """The pids holding a flock on `path`, as /proc/locks lists them (Linux; empty where it cannot be read)."""
    try:
        inode = str(os.stat(path, follow_symlinks=False).st_ino)
        lines = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    pids = set()
    for line in lines:
        fields = [f for f in line.split()[1:] if f != "->"]
        if (len(fields) >= 5 and fields[0] == "FLOCK" and fields[4].rsplit(":", 1)[-1] == inode
                and fields[3].isdigit()):
            pids.add(int(fields[3]))
    return sorted(p for p in pids if p not in (0, os.getpid()))


def _command_of(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 200 else text[:197] + "..."


@contextlib.contextmanager
def _serve_or_reset(state_dir: Path):
    """Held while a serve records itself and opens the database, and while reset looks for serves and moves the
    database aside (DIR/reset.lock, flock): a serve starting during a reset opens the database after it moved."""
    fd = os.open(Path(state_dir) / "reset.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)      # closing drops the lock


def reset_state(state_dir: Path) -> list[tuple[Path, Path]]:
    """`infra emulator reset`: move the state database aside (state.move_aside), refused (DiagnosticError
    local.state-served, naming each serve to stop) while an `infra emulator serve` holds the directory, and
    (local.state-in-use) while any other process runs an emulator over it (an `infra apply --local`)."""
    state_dir = private_state_dir(state_dir, create=False)
    with _serve_or_reset(state_dir):
        return _reset_unless_served(state_dir)


def _reset_unless_served(state_dir: Path) -> list[tuple[Path, Path]]:
    serves = live_serves(state_dir)
    reset = NextStep(("infra", "emulator", "reset"), ("--dir", str(state_dir)))
    if serves:
        named = ", ".join(f"pid {r['pid']}" + (f" at {r['url']}" if isinstance(r.get("url"), str) else "") for r in serves)
        pids = " ".join(str(r["pid"]) for r in serves)
        raise DiagnosticError([Diagnostic(
            "error", SERVED_RULE, says(NextStep(("infra", "emulator", "serve")), f" ({named}) holds {state_dir}: "
                                       "moving its state aside now would leave it writing to the old database while "
                                       "other commands start a new one (two clouds)"),
            None, None, None, says(f"stop it first (Ctrl-C where it runs, or kill {pids}), then run ", reset, " again"))])
    path = state_dir / IN_USE_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = _in_use_holders(path)
            named = "; ".join(f"pid {p}" + (f": {c}" if (c := _command_of(p)) else "") for p in holders)
            raise DiagnosticError([Diagnostic(
                "error", IN_USE_RULE, says(f"another infra process{f' ({named})' if named else ''} is using the "
                                           f"local cloud in {state_dir} (an ", NextStep(("infra", "..."), ("--local",)),
                                           " running its own emulator): moving its state aside now would leave it "
                                           "writing to the old database, reporting changes no later command sees"),
                None, None, None,
                says("wait for it to finish (or stop it" + (f": kill {' '.join(map(str, holders))}" if holders else ""),
                     "), then run ", reset, " again"))]) from None
        return move_aside(state_dir)     # under the exclusive lock: an emulator starting now waits for it
    finally:
        os.close(fd)


class EmulatorServer:
    def __init__(self, state_dir: Path, port: int = 0, faults: FaultConfig | None = None, *,
                 world: Path | None = None, hold_directory: bool = False):
        """hold_directory: record this process in DIR/serve-PID.lock while it runs (`infra emulator serve`), so
        `infra emulator reset` refuses to move the state aside under it."""
        self.state_dir = Path(state_dir)
        self._hold_directory = hold_directory
        self._serve_lock: Path | None = None
        self._in_use: int | None = None     # DIR/in-use.lock, held shared while this emulator runs
        self.faults = faults or FaultConfig()
        self.stats = RequestStats()
        self._port = port
        self._world_path = world
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.backend: EmulatedService | None = None   # the emulated service (tests and benches reach it by this name)
        self.cert_path = self.state_dir / "cert.pem"

    # lifecycle
    def start(self) -> "EmulatorServer":
        # holds the token, keys, uploads and the shims jobs run: trusted only if nobody else can write it
        self.state_dir = private_state_dir(self.state_dir)
        try:
            cert, key = ensure_certificate(self.state_dir)
            self.cert_path = cert
            with _serve_or_reset(self.state_dir) if self._hold_directory else contextlib.nullcontext():
                if self._hold_directory:      # before the database is opened: a reset from now on sees this serve
                    self._write_serve_lock(None)
                self._in_use = _hold_in_use(self.state_dir)   # before the database is opened, as the serve's lock
                service = EmulatedService(self.state_dir, load_world(self._world_path), FaultInjector(self.faults))
            httpd = _Server((LOOPBACK, self._port), _Handler)
        except BaseException:
            self._release_serve_lock()
            self._release_in_use()
            raise
        if self._hold_directory:
            self._write_serve_lock(f"https://{LOOPBACK}:{httpd.server_address[1]}/")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        # The TLS handshake happens in the request's thread (bounded: _Handler.setup), not in the accept loop.
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        httpd.emulator = self
        service.base_url = f"https://{LOOPBACK}:{httpd.server_address[1]}/"
        service.runner = JobRunner(service)
        service.runner.recover()
        self.backend, self._httpd = service, httpd
        # stop() waits for the accept loop to see the request, up to one poll interval: every `--local`
        # command pays it on exit (0.1 s cost it 0.05 s on average); an idle poll costs microseconds.
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="infra-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        if self.backend is not None:
            if self.backend.runner is not None:
                self.backend.runner.stop()
            self.backend.close()
        self._httpd = self._thread = None
        self._release_serve_lock()
        self._release_in_use()

    def _release_in_use(self) -> None:
        if self._in_use is not None:
            os.close(self._in_use)      # closing drops the lock
            self._in_use = None

    def _write_serve_lock(self, url: str | None) -> None:
        self._serve_lock = _serve_lock_path(self.state_dir, os.getpid())
        write_private_file(self._serve_lock, json.dumps({**runner_identity(), "url": url}).encode(), 0o600)

    def _release_serve_lock(self) -> None:
        if self._serve_lock is not None:
            try:
                os.unlink(self._serve_lock)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    log.warning("cannot remove %s: %s", self._serve_lock, exc)
            self._serve_lock = None

    def serve_forever(self) -> None:
        """Block until interrupted (the `infra emulator serve` command)."""
        try:
            while self._thread is not None and self._thread.is_alive():
                time.sleep(0.5)
        finally:
            self.stop()

    def __enter__(self) -> "EmulatorServer":
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # facts about the running server
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the emulator is not running: call start() first")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}/"

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def _running_backend(self) -> EmulatedService:
        if self.backend is None:
            raise RuntimeError("the emulator is not running: call start() first")
        return self.backend

    def ensure_workspace(self, subscription_id: str, resource_group: str, name: str, location: str) -> dict:
        """Create the workspace if absent (local mode: a stack's workspace exists); return its body."""
        return ensure_workspace(self._running_backend(), Scope(subscription_id, resource_group, name), location)

    @property
    def token(self) -> str:
        """The bearer token every request must carry (also in DIR/token, mode 0600)."""
        return self._running_backend().token

    @property
    def token_path(self) -> Path:
        return token_path(self.state_dir)

    # one request
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes | Callable[[], bytes]) -> Response:
        """The answer to one request. `body` may be a function reading it: it is called only once the request
        is authorised, so nobody without the token can make the emulator buffer a body."""
        req = Request.parse(method, raw_path, headers, b"")
        try:
            route, args = self._authorised_route(req)
            if callable(body):
                body = body()
            req = replace(req, body=body)
            if route.management:
                self._management_checks(req, route)
            backend = self._running_backend()
            backend.settle()
            response = route.handler(backend, req, **args)
        except ArmError as exc:
            response = exc.response()
        except BlobError as exc:
            response = exc.response(method)
        except DiagnosticError as exc:   # its state could not be written (a full disk): said, as a service would
            response = json_response(500, {"error": {"code": "InternalServerError",
                                                     "message": "; ".join(d.message for d in exc.diagnostics)}})
        except Exception:  # noqa: BLE001 - a bug in the emulator answers 500 like a service would, and is logged
            log.exception("emulator error on %s %s", method, req.path)
            response = json_response(500, {"error": {"code": "InternalServerError",
                                                     "message": "The emulator failed on this request; see its log."}})
        self.stats.record(method, req.path, response.status)
        return response

    def _authorised_route(self, req: Request) -> tuple[routes.Route, dict]:
        """The route for req if it proves it holds the token (or a SAS covering it); 401 otherwise, before
        anything else is said about the path (an unknown path is a 404 only to the token's holder)."""
        token = self._running_backend().token
        try:
            route, args = routes.match(req.method, req.path)
        except ArmError:
            if not auth.bearer_ok(req.headers, token):
                raise _arm_unauthorised(req)
            raise
        if auth.bearer_ok(req.headers, token):
            return route, args
        if route.signed_link is not None and route.signed_link(req, args, token):
            return route, args
        if route.handler is routes.blob_handler:
            code = "AuthenticationFailed" if req.query.get("sig") or "authorization" in req.headers \
                else "NoAuthenticationInformation"
            raise BlobError(401, code, "Server failed to authenticate the request. Present the emulator's token "
                                       "(DIR/token) as a bearer token, or a SAS it issued.")
        raise _arm_unauthorised(req)

    def _management_checks(self, req: Request, route: routes.Route) -> None:
        if route.api_version and "api-version" not in req.query:
            raise ArmError(400, "MissingApiVersionParameter",
                           "The api-version query parameter (?api-version=) is required for all requests.")
        if self.faults.latency_s:
            time.sleep(self.faults.latency_s)
        fault = self._running_backend().faults.request_fault()
        if fault == "throttle":
            raise ArmError(429, "TooManyRequests", "The request was throttled (injected by the emulator).",
                           headers={"Retry-After": str(self.faults.retry_after_s)})
        if fault == "error":
            raise ArmError(500, "InternalServerError", "The server failed (injected by the emulator).")


def _arm_unauthorised(req: Request) -> ArmError:
    missing = "authorization" not in req.headers
    code = "AuthenticationFailed" if missing else "InvalidAuthenticationToken"
    message = ("Authentication failed. The 'Authorization' header is missing." if missing else
               "The access token is invalid: present the emulator's token (DIR/token) as a bearer token.")
    return ArmError(401, code, message, headers={
        "WWW-Authenticate": 'Bearer authorization_uri="https://login.microsoftonline.com/common", '
                            f'error="invalid_token", error_description="{message.replace(chr(34), chr(39))}"'})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # the listen backlog (socketserver's default is 5): a burst of connections waits to be accepted (and, past
    # MAX_CONNECTIONS, to evict an idle one) rather than having its SYNs dropped and retried a second later
    request_queue_size = 2 * MAX_CONNECTIONS
    emulator: EmulatorServer

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._connections_lock = threading.Lock()
        # every connection a thread serves -> whether it waits for the client (a handshake, the next request);
        # insertion order is the order they began to wait, so the first waiting one has waited longest
        self._connections: dict[socket.socket, bool] = {}

    def server_bind(self) -> None:
        """HTTPServer's, without its socket.getfqdn: a reverse lookup of 127.0.0.1 (and the idna codec's import) on
        every start, for a name only CGI scripts read."""
        socketserver.TCPServer.server_bind(self)
        host, self.server_port = self.server_address[:2]
        self.server_name = str(host)        # an AF_INET address: the host is a str already

    def process_request(self, request, client_address) -> None:
        with self._connections_lock:
            if len(self._connections) >= MAX_CONNECTIONS:
                idle = next((c for c, waiting in self._connections.items() if waiting), None)
                if idle is None:
                    self.shutdown_request(request)      # every thread is answering a request: refuse at once
                    return
                del self._connections[idle]
                _hang_up(idle)                          # its thread wakes from its read and ends
            self._connections[request] = True
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(request, None)

    def waiting(self, connection: socket.socket, waiting: bool) -> None:
        """Mark a connection as waiting for its client (evictable) or as answering a request (not)."""
        with self._connections_lock:
            if connection in self._connections:
                del self._connections[connection]       # re-inserted last: the newest to wait
                self._connections[connection] = waiting

    def handle_error(self, request, client_address) -> None:
        # Clients that drop a connection (or fail TLS, or time out) are not the emulator's errors.
        log.debug("connection from %s ended abnormally", client_address, exc_info=True)


def _hang_up(connection: socket.socket) -> None:
    """End a connection another thread is reading: shutdown wakes its read (the plain socket's shutdown, which
    leaves the TLS object to the thread that owns it)."""
    try:
        socket.socket.shutdown(connection, socket.SHUT_RDWR)
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out in two writes, and with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers: about 40 ms on every kept-alive response
    disable_nagle_algorithm = True
    timeout = IDLE_TIMEOUT_S    # StreamRequestHandler.setup sets it on the connection
    server: _Server

    def setup(self) -> None:
        # The handshake, bounded: a connection that never speaks TLS ends here (the server logs it at debug).
        self.request.settimeout(HANDSHAKE_TIMEOUT_S)
        self.request.do_handshake()
        super().setup()

    def parse_request(self) -> bool:
        self.server.waiting(self.request, False)       # a request line arrived: its thread is busy until answered
        return super().parse_request()

    def handle_one_request(self) -> None:
        super().handle_one_request()
        self.server.waiting(self.request, True)

    def _serve(self) -> None:
        read: list[bool] = []

        def body() -> bytes:
            read.append(True)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        response = self.server.emulator.handle(self.command, self.path, dict(self.headers.items()), body)
        if not read and int(self.headers.get("Content-Length") or 0):
            self.close_connection = True   # the refused request's body is still on the wire
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("x-ms-request-id", self.headers.get("x-ms-client-request-id") or "emulator")
        self.end_headers()
        if self.command != "HEAD" and response.body:
            self.wfile.write(response.body)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
        log.debug("%s %s", self.address_string(), format % args)
