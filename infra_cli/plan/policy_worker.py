"""Evaluates Rego policies for plan/policy.py, in a child process of its own: the parent bounds its time (a timeout,
then SIGKILL), this process its memory (RLIMIT_AS). It imports nothing of infra_cli, so it runs as a plain script
(`python policy_worker.py`), and only it loads regopy (https://pypi.org/project/regopy/).

Request on standard input (JSON): {"modules": [[NAME, SOURCE], ...], "input": JSON_TEXT, "namespaces": [NS, ...],
"memory_mb": N}. Answer on standard output (JSON), one of:
  {"missing": "regopy"}                               regopy is not installed
  {"module_error": TEXT}                              a module does not parse or compile (regopy's error, which
                                                      names the module and the byte offset)
  {"results": {NS: {"value": DOC} | {"error": TEXT}}} data.NS evaluated, or the error that stopped it
"""

import json
import os
import re
import sys

try:
    import resource
    _RLIMITS = True
except ImportError:   # not on Windows: the parent's timeout still bounds the policies
    _RLIMITS = False
try:
    from regopy import Interpreter, RegoError
    from regopy.rego_shared import rego_output_ok, rego_output_string, rego_query
except ImportError:   # said to the parent, which names the extra to install
    Interpreter = None


def _limit_memory(megabytes: int) -> None:
    """At most `megabytes` more address space than the interpreter holds now: regopy's allocator (snmalloc)
    reserves a large range when it starts, so an absolute RLIMIT_AS would stop it before any policy runs."""
    if not _RLIMITS:
        return
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):   # no /proc (not Linux): the parent's timeout still bounds it
        return
    limit = size_kb * 1024 + megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


_BLANKS = re.compile(r"\s*")


def _blanks_end(text: str, start: int) -> int:
    """Where the blanks from `start` end."""
    blanks = _BLANKS.match(text, start)
    assert blanks is not None   # `\s*` matches at every position, if only the empty string
    return blanks.end()


def _loads(text: str):
    """regopy's JSON, read. rego-cpp 1.5 writes a string's inner quotes unescaped where `sprintf` formatted a computed
    string (`sprintf("(%s)", [concat(",", xs)])` gives `("a,b")`): such a quote, one not followed by what may follow
    a JSON string (`,` `:` `]` `}` or the end), is read as part of the string."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    out, inside, i = [], False, 0
    while i < len(text):
        c = text[i]
        if inside and c == "\\":
            out.append(text[i:i + 2])
            i += 2
            continue
        if c == '"':
            if not inside:
                inside = True
            elif text[_blanks_end(text, i + 1):][:1] in ("", ",", ":", "]", "}"):
                inside = False
            else:
                c = '\\"'
        out.append(c)
        i += 1
    return json.loads("".join(out))


def main() -> int:
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)   # regopy's native library prints its errors on stdout: keep them off the answer's channel
    request = json.load(sys.stdin)
    if Interpreter is None:
        json.dump({"missing": "regopy"}, answer)
        return 0
    interpreter = Interpreter()
    interpreter.strict_built_in_errors = True   # a built-in given the wrong type is an error, not `undefined`
    _limit_memory(int(request["memory_mb"]))
    for name, source in request["modules"]:
        try:
            interpreter.add_module(name, source)
        except RegoError as exc:
            json.dump({"module_error": str(exc)}, answer)
            return 0
    interpreter.set_input_term(request["input"])
    results: dict[str, dict[str, object]] = {}
    for namespace in request["namespaces"]:
        output = rego_query(interpreter._impl, f"data.{namespace}")
        text = rego_output_string(output) if rego_output_ok(output) else ""
        if not text or text == "<error>":
            results[namespace] = {"error": "a built-in function was given a value of the wrong type, or failed "
                                           "(as `opa eval --strict-builtin-errors` reports it)"}
        elif text.startswith("(error"):
            results[namespace] = {"error": text}
        elif text == "undefined":
            results[namespace] = {"value": {}}
        else:
            expressions = _loads(text).get("expressions") or [{}]
            results[namespace] = {"value": expressions[0]}
    json.dump({"results": results}, answer)
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
