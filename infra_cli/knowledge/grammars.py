"""The grammars a value is held to before it reaches a Dockerfile, a shell line or a job: whole-value matches
(never a `$` that lets a trailing newline through), ASCII only, no control characters anywhere.

- Image references: the OCI distribution reference grammar
  (https://github.com/distribution/reference/blob/main/reference.go), with Docker's reading of a name
  without a registry (https://github.com/distribution/reference/blob/main/normalize.go): the first
  component is a registry host only when it has a `.` or a `:` or is `localhost`.
- pip requirement specs: PEP 508 (https://peps.python.org/pep-0508/), read by `packaging`, the parser pip
  itself uses (imported only when there is a spec to read).
- Versions, git refs and download URLs, for the Dockerfile templates' other parameters.

Each `*_problem` function returns None for a good value, else what is wrong in words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

REFERENCE_GRAMMAR = ("host[:port]/repository[:tag][@algorithm:hex] (the OCI distribution reference grammar, "
                     "https://github.com/distribution/reference/blob/main/reference.go)")

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*", re.ASCII)
_DOMAIN_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)  # DNS: 63 at most
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]", re.ASCII)
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}", re.ASCII)
NAME_MAX = 255      # reference.go NameTotalLengthMax
DOCKER_HUB = "registry-1.docker.io"
# The names Docker reads as Docker Hub: `docker.io/ubuntu` and `index.docker.io/ubuntu` are `ubuntu`, pulled from
# registry-1.docker.io as library/ubuntu (https://github.com/distribution/reference/blob/main/normalize.go:
# legacyDefaultDomain, defaultDomain, officialRepoPrefix; Docker's daemon pulls docker.io from registry-1.docker.io)
DOCKER_HUB_NAMES = ("docker.io", "index.docker.io")


def control_characters(text: str) -> list[str]:
    """The control characters in `text` (C0, DEL, C1, line and paragraph separators), as `\\n`-style escapes."""
    found = [c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp")]
    return [repr(c)[1:-1] for c in dict.fromkeys(found)]


def text_problem(text: object) -> str | None:
    """Text with no control character: the least any value that reaches a rendered file is held to."""
    if not isinstance(text, str):
        return f"{text!r} is not text"
    bad = control_characters(text)
    return f"{text!r} holds control characters ({', '.join(bad)})" if bad else None


@dataclass(frozen=True)
class ImageName:
    """A registry image reference's parts, as Docker reads a name (Docker Hub when no registry is named)."""
    host: str                  # host[:port]
    repository: str
    tag: str | None
    digest: str | None


def host_problem(host: str) -> str | None:
    """A registry host[:port]: DNS labels (or [IPv6]) and a port 1-65535."""
    name, port = host, None
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[:end + 1], host[end + 1:]
        if end < 0 or (rest and not rest.startswith(":")):
            return f"{host!r} is not a registry host"
        port = rest[1:] if rest else None
    elif ":" in host:
        name, port = host.split(":", 1)
    if name.startswith("["):
        if not _IPV6.fullmatch(name):
            return f"{name!r} is not an IPv6 address in brackets"
    elif len(name) > 253 or not all(_DOMAIN_LABEL.fullmatch(label) for label in name.split(".")):
        return f"{name!r} is not a registry host name (DNS labels of letters, digits and '-', at most 63 each)"
    if port is not None and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return f"{port!r} is not a port (1-65535)"
    return None


def split_image_name(text: str) -> ImageName:
    """host/repository:tag@digest as Docker splits it; raises ValueError (the reason) if it breaks the grammar."""
    problem = text_problem(text)
    if problem:
        raise ValueError(problem)
    name, digest = text.split("@", 1) if "@" in text else (text, None)
    tag = None
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        host, repository = first, rest
        bad_host = host_problem(host)
        if bad_host:
            raise ValueError(bad_host)
        if host.lower() in DOCKER_HUB_NAMES:   # Docker's own normalisation (distribution/reference normalize.go)
            host, repository = DOCKER_HUB, repository if "/" in repository else f"library/{repository}"
    else:
        host, repository = DOCKER_HUB, name if "/" in name else f"library/{name}"
    if not REPOSITORY.fullmatch(repository):
        raise ValueError(f"{repository!r} is not a repository name (lower-case letters and digits, "
                         "parts joined by '.', '_', '__' or '-', separated by '/')")
    if len(name) > NAME_MAX:
        raise ValueError(f"the name is {len(name)} characters, more than {NAME_MAX}")
    if tag is not None and not TAG.fullmatch(tag):
        raise ValueError(f"{tag!r} is not a tag (up to 128 letters, digits, '_', '.' or '-', not starting "
                         "with '.' or '-')")
    if digest is not None and not DIGEST.fullmatch(digest):
        raise ValueError(f"{digest!r} is not a digest (algorithm:hex, e.g. sha256: and 64 hex digits)")
    return ImageName(host, repository, tag, digest)


def image_reference_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"{text!r} is not an image reference"
    if text_problem(text):
        return text_problem(text)
    try:
        split_image_name(text)
    except ValueError as exc:
        return f"{text!r} is not an image reference: {exc}"
    return None


def pip_requirement_problem(text: object) -> str | None:
    """A PEP 508 requirement (what `pip install SPEC` takes as a requirement, never an option)."""
    problem = text_problem(text)
    if problem:
        return problem
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(str(text))   # text, as text_problem found
    except (InvalidRequirement, SyntaxError, ValueError) as exc:  # a marker string '\\' is a SyntaxError
        first = str(exc).splitlines()[0] if isinstance(exc, InvalidRequirement) and str(exc) else "not PEP 508"
        return f"{text!r} is not a pip requirement (PEP 508): {first}"
    return None


_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+", re.ASCII)
_GIT_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]{0,127}", re.ASCII)
_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?"
                  r"(?:\?[A-Za-z0-9._~%!$&'()*+,;=:@/?-]*)?", re.ASCII)


def version_problem(text: object) -> str | None:
    if isinstance(text, str) and _VERSION.fullmatch(text):
        return None
    return f"{text!r} is not a version X.Y.Z"


def git_ref_problem(text: object) -> str | None:
    """A branch or tag name as `git clone --branch` takes it (letters, digits, '_', '.', '+', '/', '-')."""
    if (isinstance(text, str) and _GIT_REF.fullmatch(text) and ".." not in text
            and not text.endswith((".", "/", ".lock"))):
        return None
    return (f"{text!r} is not a git tag or branch name (letters, digits, '_', '.', '+', '/' and '-', "
            "not starting with '-' or '.', no '..')")


def https_url_problem(text: object) -> str | None:
    """An https URL of URL characters only (RFC 3986): a download into an image is never plain http."""
    if isinstance(text, str) and _URL.fullmatch(text):
        return None
    return f"{text!r} is not an https:// URL (RFC 3986 characters only)"
