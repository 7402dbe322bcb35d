"""The wire: requests and responses as data, ARM error bodies, and the shapes both sides share."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]       # keys lower-cased: ARM query parameters are case-insensitive
    headers: dict[str, str]     # keys lower-cased
    body: bytes = b""

    @classmethod
    def parse(cls, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> "Request":
        parts = urlsplit(raw_path)
        query = {k.lower(): v for k, v in parse_qsl(parts.query, keep_blank_values=True)}
        return cls(method, parts.path, query, {k.lower(): v for k, v in headers.items()}, body)

    def json(self) -> dict:
        if not self.body:
            return {}
        try:
            value = json.loads(self.body)
        except ValueError as exc:
            raise ArmError(400, "InvalidRequestContent", f"The request content is not valid JSON: {exc}")
        if not isinstance(value, dict):
            raise ArmError(400, "InvalidRequestContent", "The request content must be a JSON object.")
        return value


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, value: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(value).encode()
    return Response(status, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})


class ArmError(Exception):
    """An answer in ARM's error shape: {"error": {"code", "message", "target"?}}."""

    def __init__(self, status: int, code: str, message: str, target: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.target = status, code, message, target
        self.headers = headers or {}

    def body(self) -> dict:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        return {"error": error}

    def response(self) -> Response:
        return json_response(self.status, self.body(), {"x-ms-error-code": self.code, **self.headers})


def public(body: dict) -> dict:
    """A stored body as Azure shows it: without the emulator's private bookkeeping ("_private")."""
    return {k: v for k, v in body.items() if k != "_private"}


def not_found(kind: str, name: str, scope: str = "") -> ArmError:
    where = f" under {scope}" if scope else ""
    return ArmError(404, "ResourceNotFound", f"The {kind} '{name}'{where} was not found.")


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def system_data(created: str, modified: str | None = None) -> dict:
    return {"createdAt": created, "createdBy": "local", "createdByType": "User",
            "lastModifiedAt": modified or created, "lastModifiedBy": "local", "lastModifiedByType": "User"}
