"""What an Azure SDK exception says, as plain text: the ONE place every command reads Azure errors through.

azure-ai-ml formats its errors for a terminal (azure/ai/ml/_exception_helper.py): colour escape codes, a
numbered headline, a "Details:" section with "(x)" items, then "Resolutions:" and "Additional Resources:"
boilerplate. azure-core's HttpResponseError reads "(Code) message" followed by "Code:"/"Message:" lines.
Both become: the code, the first meaningful line, and the detail lines, with no escape codes.
"""

from __future__ import annotations

import re

from infra_cli.knowledge.update_semantics import transient_errors

# CSI sequences (colours, cursor moves), other two-byte escapes, and the control characters left over
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")
_SECTION_END = ("resolutions:", "additional resources:", "if using the cli")
_HTTP_ECHO = re.compile(r"^(code|message|target|exception details|inner error|additional information):", re.I)
_BULLET = re.compile(r"^(\d+\)|\(x\)|-|\*)\s*")


def clean_text(text: str) -> str:
    """Text without terminal escape codes or control characters (newlines and tabs kept)."""
    return _ESCAPE.sub("", text.replace("\r\n", "\n"))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in clean_text(text).splitlines() if line.strip()]


def _reported_code(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if code:
        return str(code)
    response = getattr(exc, "response", None)
    try:
        body = response.json() if response is not None else None
        if isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("code"):
            return str(body["error"]["code"])
    except Exception:  # a body that is not JSON says nothing more
        pass
    status = getattr(exc, "status_code", None)
    return f"HTTP{status}" if status else type(exc).__name__


def _raw_message(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    return str(getattr(error, "message", None) or getattr(exc, "message", None) or exc or "")


def _parts(exc: BaseException) -> tuple[str, str, list[str]]:
    """(code, headline, details) of an SDK exception."""
    code = _reported_code(exc)
    lines = _lines(_raw_message(exc))
    if not lines:
        return code, type(exc).__name__, []
    headline, details = _BULLET.sub("", lines[0]), []
    for line in lines[1:]:
        low = line.lower()
        if low.startswith(_SECTION_END):
            break  # boilerplate from here on
        if low == "details:" or _HTTP_ECHO.match(line):
            continue  # a section title, or azure-core repeating the code and message
        details.append(_BULLET.sub("", line))
    echoed = re.match(r"^\(([A-Za-z][\w.]*)\)\s*(.*)$", headline)  # "(Code) message": the code is shown apart
    if echoed:
        if code == type(exc).__name__:
            code = echoed.group(1)
        if echoed.group(1) == code:
            headline = echoed.group(2)
    details += [d for d in _arm_details(exc) if d not in details]
    return code, headline, [d for d in details if d != headline]


def _arm_details(exc: BaseException) -> list[str]:
    """`CODE: message` of each entry of an ARM error's `details` (ErrorDetail.details in Azure's common types,
    https://github.com/Azure/azure-rest-api-specs/blob/main/specification/common-types/resource-management/v3/types.json):
    azure-core keeps them on exc.error.details, apart from the message."""
    error = getattr(exc, "error", None)
    out = []
    for detail in getattr(error, "details", None) or []:
        message = " ".join(_lines(str(getattr(detail, "message", None) or "")))
        if message:
            code = getattr(detail, "code", None)
            out.append(f"{code}: {message}" if code else message)
    return out


def azure_error_code(exc: BaseException) -> str:
    """The ARM error code of an SDK exception (QuotaExceeded, Conflict, ...), else the exception's type."""
    return _parts(exc)[0]


def azure_error_message(exc: BaseException) -> str:
    """The first meaningful line of an SDK exception, without escape codes or numbering."""
    return _parts(exc)[1]


def azure_error_details(exc: BaseException) -> list[str]:
    """The lines after the headline that say more (azure-ai-ml's "Details:" items), without boilerplate."""
    return _parts(exc)[2]


def describe_azure_error(exc: BaseException) -> str:
    """`CODE: headline` and, indented below it, the details: what every command prints for an Azure refusal."""
    code, headline, details = _parts(exc)
    return "\n".join([f"{code}: {headline}", *(f"  {d}" for d in details)])


# The statuses azure-core's RetryPolicy retries (RetryPolicy._RETRY_CODES, with retry_on_status_codes empty): an
# error with one of them escaped only after every retry of clients.retry_policy was spent.
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def retries_spent(exc: BaseException) -> bool:
    """Azure answered a status the retry policy retries: the error came after its last retry, not the first try."""
    return getattr(exc, "status_code", None) in RETRIED_STATUSES


def is_sign_in_failure(exc: BaseException) -> bool:
    """The credential found no token (DefaultAzureCredential's chain exhausted, an expired `az login`): raised
    on this machine before any request, so it carries no response, unlike a 401 that Azure answered."""
    from azure.core.exceptions import ClientAuthenticationError

    return isinstance(exc, ClientAuthenticationError) and getattr(exc, "response", None) is None


def is_not_found(exc: BaseException) -> bool:
    """A 404, however the SDK dresses it (azure-ai-ml raises a ValidationException for a missing asset label)."""
    from azure.core.exceptions import ResourceNotFoundError

    if isinstance(exc, ResourceNotFoundError) or getattr(exc, "status_code", None) == 404:
        return True
    return type(exc).__name__ == "ValidationException" and "does not exist" in str(exc)


def is_forbidden(exc: BaseException) -> bool:
    """A 403: the identity may not read this (AuthorizationFailed), which retrying does not change."""
    return getattr(exc, "status_code", None) == 403


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: a connection failure, or a status or Azure error code listed as transient
    (validators/update_semantics.yaml)."""
    from azure.core.exceptions import ServiceRequestError, ServiceResponseError

    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return True
    rules = transient_errors()
    return getattr(exc, "status_code", None) in rules.http_status or azure_error_code(exc) in rules.codes
