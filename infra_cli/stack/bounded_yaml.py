"""YAML read under bounds before anything is built of it: a stack file's text (a regular UTF-8 file of at most
MAX_STACK_BYTES, a FIFO refused at once), its nesting (at most MAX_DEPTH levels, checked on the event stream before
the recursive composer runs), and its syntax errors said where they are, in plain words for the two mistakes people
make (a tab in the indentation, a key indented as no key above it). stack/source.py builds the values."""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import yaml

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Bounds on hostile input (a stack is a few KiB nested about six levels): the file read, and the nesting the
# recursive composer and builder may see.
MAX_STACK_BYTES = 1 << 20
MAX_DEPTH = 64


def compose(text: str, file: str) -> yaml.Node | None:
    """The YAML node tree of `text` (None when it holds no document), its depth checked first; DiagnosticError
    stack.syntax (or stack.too-deep) where it does not parse, at the line that is wrong."""
    try:
        _check_depth(text, file)
        return yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        plain = _indentation_problem(text, line) if line else None
        if plain is not None:   # at the line that is wrong, in plain words
            raise DiagnosticError([Diagnostic("error", "stack.syntax", plain[2], file, plain[0], plain[1],
                                              plain[3])]) from None
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise DiagnosticError([Diagnostic("error", "stack.syntax", f"YAML syntax error: {problem}", file,
                                          line, column, "check indentation, colons and quoting here")])
    except yaml.YAMLError as exc:
        raise DiagnosticError([Diagnostic("error", "stack.syntax", f"YAML error: {exc}", file, 1, 1,
                                          "the file must be one YAML document")])


def _folder_hint(folder: str) -> str:
    """`infra plan .` as Terraform reads a folder's *.tf: infra reads one stack file, so name the ones here."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith((".yaml", ".yml")))
    except OSError:
        names = []
    if not names:
        return "pass the path of a stack YAML file: a stack is one file, not a folder (as Terraform's *.tf)"
    shown = ", ".join(os.path.join(folder, n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
    return says(f"a stack is one file, not a folder (as Terraform's *.tf): pass one of the YAML files here ({shown}); ",
                NextStep(("infra", "validate")), " takes several")


def read_stack_text(path: str | os.PathLike) -> str:
    """The text of a stack file: a regular file of at most MAX_STACK_BYTES, checked before reading.

    Opened non-blocking, so a FIFO (or a device) is refused at once instead of waiting for a writer.
    Raises DiagnosticError for anything that is not a readable UTF-8 regular file.
    """
    file = str(path)

    def refuse(rule: str, message: str, hint: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", rule, message, file, None, None, hint)])

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise refuse("stack.not-found", f"no such file: {file}",
                     "pass the path of a stack YAML file, e.g. stacks/ib-a100.yaml") from None
    except OSError as exc:
        raise refuse("stack.unreadable", f"cannot read {file}: {exc.strerror or exc}",
                     "the stack file must be a readable regular file") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise refuse("stack.unreadable", f"{file} is {kind}, not a stack file",
                     _folder_hint(file) if stat.S_ISDIR(mode) else "pass the path of a stack YAML file (a regular file)")
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(MAX_STACK_BYTES + 1)
        except OSError as exc:
            raise refuse("stack.unreadable", f"cannot read {file}: {exc.strerror or exc}",
                         "the stack file must be a readable regular file") from None
    if len(data) > MAX_STACK_BYTES:
        raise refuse("stack.too-large", f"{file} is larger than {MAX_STACK_BYTES >> 20} MiB",
                     "a stack file is a few KiB: split it, or move large content into files it names")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse("stack.unreadable", f"{file} is not UTF-8 text: {exc.reason} at byte {exc.start}",
                     "save the stack file as UTF-8") from None


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH before composing: the composer recurses per level (a RecursionError
    at ~1,000 levels, a crash of the C composer at ~50,000). The event stream is read without recursion.
    libyaml 0.2.6 and later (PyYAML 6.0.4's wheels) bound nesting themselves, and its scanner reads a run of
    flow openers ahead of the events, so its own refusal can come first: it means deeper than MAX_DEPTH too."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(file, event.start_mark)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if _PARSER_DEPTH_LIMIT in (exc.problem or "") and exc.problem_mark is not None:
            raise _too_deep(file, exc.problem_mark) from None
        raise


# libyaml's own refusal (https://github.com/yaml/libyaml/blob/master/src/scanner.c, yaml_set_max_nest_level)
_PARSER_DEPTH_LIMIT = "exceeded maximum nesting depth"


def _too_deep(file: str, mark: Any) -> DiagnosticError:
    return DiagnosticError([Diagnostic(
        "error", "stack.too-deep", f"the document nests more than {MAX_DEPTH} levels deep", file,
        mark.line + 1, mark.column + 1, "a stack nests a few levels: flatten this structure")])


_KEY_LINE = re.compile(r"( *)([A-Za-z0-9_.-]+) *:(?: +(.*))?$")   # `  key: value` (a plain block key)


def _indentation_problem(text: str, at: int) -> tuple[int, int, str, str] | None:
    """What a YAML error at line `at` (1-based) is, said where it is and in plain words, when it is one of the
    two mistakes people make: a tab in a line's indentation (PyYAML: "found character that cannot start any
    token"), or a key indented as no key above it is (PyYAML: "did not find expected key", "mapping values are not
    allowed here", often at the line after). (line, column, message, hint), or None: PyYAML's own words then."""
    lines = text.splitlines()[:at]
    for number, row in enumerate(lines, 1):
        lead = row[:len(row) - len(row.lstrip(" \t"))]
        if "\t" in lead:
            return (number, lead.index("\t") + 1, "YAML syntax error: a tab in this line's indentation: YAML "
                    "indents with spaces only", "replace the tab with spaces, as many as the lines beside it have")
    found = [(n, _KEY_LINE.match(row)) for n, row in enumerate(lines, 1) if row.strip() and
             not row.lstrip().startswith("#")]
    if not found or any(m is None for _, m in found[-3:]):   # a list, a flow or block scalar near it: not judged
        return None
    keys = [(n, m) for n, m in found if m is not None]
    for i in range(max(1, len(keys) - 2), len(keys)):   # the mark's line, and the one or two before it
        (_, above), (number, here) = keys[i - 1], keys[i]
        width, key, over, has_value = len(here.group(1)), here.group(2), above.group(2), bool(above.group(3))
        enclosing = [len(above.group(1))]   # the indents a key after `above` may have: its own, its holders'
        for _, m in reversed(keys[:i - 1]):
            if len(m.group(1)) < enclosing[-1]:
                enclosing.append(len(m.group(1)))
        if width in enclosing or not has_value and width > enclosing[0]:
            continue   # a sibling, a holder's sibling, or the first key under a key without a value
        if has_value and width > enclosing[0]:
            return (number, width + 1, f"YAML syntax error: `{key}:` is indented more than `{over}:` above it, "
                    "whose value is on its line", f"indent `{key}:` {enclosing[0]} spaces, as `{over}:` is, to set "
                    f"it beside it (or give `{over}:` no value on its line to nest it)")
        said = [str(n) for n in sorted(set(enclosing))]
        said_text = ", ".join(said[:-1]) + " or " + said[-1] if len(said) > 1 else said[0]
        return (number, width + 1, f"YAML syntax error: `{key}:` is indented {width} space"
                f"{'s' if width != 1 else ''}, as no key above it is",
                f"indent it as the keys it belongs with ({said_text} spaces)")
    return None
