"""The emulator's HTTPS server: loopback only, TLS with its own certificate, any bearer token accepted.

    with EmulatorServer(tmp_path, faults=FaultConfig(provisioning_delay_s=0.2)) as server:
        server.ensure_workspace(subscription, "rg", "ws", "eastus")
        ... point the SDKs at server.url, trusting server.cert_path ...
        server.stats.by_method()
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from infra_cli.emulator import routes
from infra_cli.emulator.backend import Backend, Scope
from infra_cli.emulator.faults import FaultConfig, FaultInjector
from infra_cli.emulator.ml_workspace import ensure_workspace
from infra_cli.emulator.runner import JobRunner
from infra_cli.emulator.stats import RequestStats
from infra_cli.emulator.tls import ensure_certificate
from infra_cli.emulator.wire import ArmError, Request, Response, json_response
from infra_cli.emulator.world import load_world

__all__ = ["EmulatorServer", "FaultConfig"]

LOOPBACK = "127.0.0.1"
log = logging.getLogger("infra.emulator")


class EmulatorServer:
    def __init__(self, state_dir: Path, port: int = 0, faults: FaultConfig | None = None, *,
                 world: Path | None = None):
        self.state_dir = Path(state_dir)
        self.faults = faults or FaultConfig()
        self.stats = RequestStats()
        self._port = port
        self._world_path = world
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.backend: Backend | None = None
        self.cert_path = self.state_dir / "cert.pem"

    # lifecycle
    def start(self) -> "EmulatorServer":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cert, key = ensure_certificate(self.state_dir)
        self.cert_path = cert
        backend = Backend(self.state_dir, load_world(self._world_path), FaultInjector(self.faults))
        httpd = _Server((LOOPBACK, self._port), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        # The TLS handshake happens in the request's thread, not in the accept loop.
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        httpd.emulator = self
        backend.base_url = f"https://{LOOPBACK}:{httpd.server_address[1]}/"
        backend.runner = JobRunner(backend)
        backend.runner.recover()
        self.backend, self._httpd = backend, httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
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

    def ensure_workspace(self, subscription_id: str, resource_group: str, name: str, location: str) -> dict:
        """Create the workspace if absent (local mode: a stack's workspace exists); return its body."""
        if self.backend is None:
            raise RuntimeError("the emulator is not running: call start() first")
        return ensure_workspace(self.backend, Scope(subscription_id, resource_group, name), location)

    # one request
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Response:
        req = Request.parse(method, raw_path, headers, body)
        try:
            route, args = routes.match(method, req.path)
            if route.management:
                self._management_checks(req, route)
            self.backend.settle()
            response = route.handler(self.backend, req, **args)
        except ArmError as exc:
            response = exc.response()
        except Exception:  # noqa: BLE001 - a bug in the emulator answers 500 like a service would, and is logged
            log.exception("emulator error on %s %s", method, req.path)
            response = json_response(500, {"error": {"code": "InternalServerError",
                                                     "message": "The emulator failed on this request; see its log."}})
        self.stats.record(method, req.path, response.status)
        return response

    def _management_checks(self, req: Request, route: routes.Route) -> None:
        if not req.headers.get("authorization", "").lower().startswith("bearer "):
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.",
                           headers={"WWW-Authenticate": 'Bearer authorization_uri="https://login.microsoftonline.com/'
                                    'common", error="invalid_token", error_description="The authentication failed '
                                    "because of missing 'Authorization' header.\""})
        if route.api_version and "api-version" not in req.query:
            raise ArmError(400, "MissingApiVersionParameter",
                           "The api-version query parameter (?api-version=) is required for all requests.")
        if self.faults.latency_s:
            time.sleep(self.faults.latency_s)
        fault = self.backend.faults.request_fault()
        if fault == "throttle":
            raise ArmError(429, "TooManyRequests", "The request was throttled (injected by the emulator).",
                           headers={"Retry-After": str(self.faults.retry_after_s)})
        if fault == "error":
            raise ArmError(500, "InternalServerError", "The server failed (injected by the emulator).")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    emulator: EmulatorServer

    def handle_error(self, request, client_address) -> None:
        # Clients that drop a connection (or fail TLS) are not the emulator's errors.
        log.debug("connection from %s ended abnormally", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        response = self.server.emulator.handle(self.command, self.path, dict(self.headers.items()), body)
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
