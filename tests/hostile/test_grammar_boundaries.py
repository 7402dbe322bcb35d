"""The grammars' edges (knowledge/grammars.py), each side of each bound: a one-character change to a bound or a
check (issue 31's mutants) fails a test here. The values reach a Dockerfile's FROM, a git clone and a download."""

from __future__ import annotations

import pytest

from infra_cli.knowledge.docker_templates import GRAMMARS
from infra_cli.knowledge.grammars import (NAME_MAX, git_ref_problem, host_problem, https_url_problem,
                                          image_reference_problem)


def _label(n: int) -> str:
    return ("a" + "b" * (n - 2) + "c") if n > 1 else "a"


@pytest.mark.parametrize("host, ok", [
    (f"{_label(63)}.example.io", True),          # a DNS label: 63 characters at most (RFC 1035 2.3.4)
    (f"{_label(64)}.example.io", False),
    (f"x.{_label(63)}", True),
    (f"x.{_label(64)}", False),
    ("-a.example.io", False), ("a-.example.io", False), ("a--b.example.io", True),
])
def test_dns_labels(host, ok):
    assert (host_problem(host) is None) is ok, host_problem(host)
    assert (image_reference_problem(f"{host}/repo:1") is None) is ok


def test_a_host_name_of_253_characters_and_no_more():
    at_bound = ".".join([_label(63)] * 4)[:253]
    assert len(at_bound) == 253 and not at_bound.endswith(".")
    assert host_problem(at_bound) is None and host_problem(at_bound + "a") is not None


@pytest.mark.parametrize("port, ok", [("1", True), ("65535", True), ("65536", False), ("0", False), ("99999", False),
                                      ("", False), ("+1", False), ("٣", False)])
def test_ports(port, ok):
    assert (host_problem(f"registry.example.io:{port}") is None) is ok
    assert (host_problem(f"[::1]:{port}") is None) is ok
    assert (image_reference_problem(f"registry.example.io:{port}/repo:1") is None) is ok


def test_a_name_of_255_characters_and_no_more():
    host = "r.io/"
    at_bound = host + "a" * (NAME_MAX - len(host))
    assert NAME_MAX == 255 and len(at_bound) == 255
    assert image_reference_problem(at_bound + ":1") is None
    assert image_reference_problem(at_bound + "b:1") is not None and "more than 255" in image_reference_problem(at_bound + "b:1")
    assert image_reference_problem("a" * 255) is None       # a Docker Hub name: counted as written
    assert image_reference_problem("a" * 256) is not None


@pytest.mark.parametrize("ref, ok", [
    ("v2.5-1", True), ("release/v1", True), ("v1.2+build", True), ("a" * 128, True),
    ("a" * 129, False),
    ("v1..2", False), ("a..", False),                                 # `..` anywhere (git check-ref-format rule 3)
    ("v1.lock", False), ("release/x.lock", False), ("v1.locked", True),   # ends with .lock (rule 1)
    ("v1/", False), ("release/", False),                              # ends with / (rule 6)
    ("v1.", False),                                                   # ends with . (rule 7)
    ("-v1", False), (".v1", False), ("v1;x", False), ("v1 x", False), ("v1\n", False), ("", False),
])
def test_git_refs(ref, ok):
    assert (git_ref_problem(ref) is None) is ok, git_ref_problem(ref)
    judge, _ = GRAMMARS["git_ref"]
    assert (list(judge(ref)) == []) is ok


@pytest.mark.parametrize("url, ok", [
    ("https://e.example/hpcx.tbz", True), ("https://e.example:8443/a/b.tbz?x=1", True),
    ("http://e.example/hpcx.tbz", False),          # a download into an image is never plain http
    ("HTTP://e.example/hpcx.tbz", False), ("ftp://e.example/hpcx.tbz", False), ("//e.example/hpcx.tbz", False),
    ("https://e.example/a b", False), ("https://e.example/\n", False),
])
def test_hpcx_url_is_https_only(url, ok):
    assert (https_url_problem(url) is None) is ok
    judge, hint = GRAMMARS["https_url_or_empty"]
    assert (list(judge(url)) == []) is ok
    assert list(judge("")) == [] and "https://" in hint


def test_hpcx_url_over_plain_http_is_refused_where_a_stack_gives_it():
    from infra_cli.knowledge.docker_templates import parameter_problems

    _, problems = parameter_problems("openmpi-rdma", {"hpcx_url": "http://e.example/hpcx.tbz"})
    assert [p.where for p in problems] == [("hpcx_url",)] and "https://" in problems[0].message
