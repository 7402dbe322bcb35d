"""`infra --help` as typer draws it, without building the command line: importing typer and reading every
command's signature is most of the time `infra --help` took beyond Python's own start-up (bench/bench_startup.py).

TEXT is what the application of commands/root.py prints for `--help` on a terminal 80 columns wide or wider
(click's help formatter wraps at min(columns, 80) - 2). It is used only while SOURCES_CRC is the CRC-32 of the
sources that draw it (commands/*.py, this file left out): a changed command, option or help sentence falls
back to typer until TEXT is drawn again, so it is never shown stale. tests/test_root_help.py holds TEXT equal
to typer's drawing; `python -m infra_cli.commands.root_help` prints this module with both drawn anew.
"""

import io
import os
import sys
import zlib

SOURCES_CRC = 0x5140b710
TEXT = """\
Usage: infra [OPTIONS] COMMAND [ARGS]...

  Plan, apply and prove distributed GPU training infrastructure on Azure
  Machine Learning.

Options:
  --version                     print the version and exit
  --chdir DIR                   run the command in DIR (Terraform's
                                -chdir=DIR)
  --install-completion [SHELL]  install completion for SHELL (bash, zsh, fish,
                                powershell, pwsh; default: the current shell)
  --show-completion [SHELL]     print the completion script for SHELL, to copy
                                it or customize the installation
  --help                        Show this message and exit.

Commands:
  validate      Check stack files offline: schema, references, InfiniBand...
  schema        Print the JSON Schema of stack files (for editors' YAML...
  rules         List the rules validate and plan judge stacks by: id,...
  skus          List VM sizes for distributed training from the catalog...
  graph         Print the stack's resources and dependencies as Graphviz...
  render        Write Azure ML CLI v2 YAML (az ml ...
  plan          Show what apply would change, and whether it can succeed...
  apply         Make Azure match the stack (or exactly a saved plan),...
  destroy       Delete everything that carries this stack's tag...
  import        Adopt an existing Azure resource into the stack (tags it;...
  force-unlock  Clear a stale stack lock (left by a killed apply).
  show          Show a saved plan, or what a stack owns in Azure now...
  output        Print the stack's output values, read live from Azure (as...
  smoke         Run the stack's smoke-test jobs (ranks, DDP replicas,...
  state         Read what a stack owns in Azure (infra's state is the...
  image         Inspect container images without a Docker daemon.
  emulator      Run the local Azure emulator.
"""


def sources_crc() -> int:
    """CRC-32 of commands/*.py but this file, in name order (zlib: no hashlib import, which loads OpenSSL)."""
    here = os.path.dirname(os.path.abspath(__file__))
    crc = 0
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and name != "root_help.py":
            with open(os.path.join(here, name), "rb") as fh:
                crc = zlib.crc32(name.encode() + b"\0" + fh.read(), crc)
    return crc


def terminal_columns() -> int:
    """The columns click's formatter wraps to, found as shutil.get_terminal_size finds them."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            stdout = sys.__stdout__   # None when Python started without a standard output
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def answered(argv: list[str]) -> bool:
    """Print TEXT for `infra --help`, when it is what typer would print; False: typer answers."""
    if argv != ["--help"] or not TEXT or terminal_columns() < 80 or sources_crc() != SOURCES_CRC:
        return False
    sys.stdout.write(TEXT)
    return True


def drawn() -> str:
    """TEXT as typer draws it now (80 columns)."""
    from infra_cli.commands.root import app

    out, stdout, columns = io.StringIO(), sys.stdout, os.environ.get("COLUMNS")
    os.environ["COLUMNS"], sys.stdout = "80", out
    try:
        app(["--help"], prog_name="infra", standalone_mode=False)
    finally:
        sys.stdout = stdout
        if columns is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = columns
    return out.getvalue()


if __name__ == "__main__":   # this module, with TEXT and SOURCES_CRC drawn anew
    path = os.path.abspath(__file__)
    with open(path) as fh:
        source = fh.read()
    head, _, rest = source.partition("\nSOURCES_CRC = ")
    tail = rest[rest.index("\n\n\ndef sources_crc"):]
    with open(path, "w") as fh:
        text = drawn()
        assert "\\" not in text and '"""' not in text, "TEXT is written as a plain triple-quoted string"
        fh.write(f'{head}\nSOURCES_CRC = {sources_crc():#010x}\nTEXT = """\\\n{text}"""{tail}')
