"""The `infra` program: `run` (its console script and `python -m infra_cli`) and `main`.

Imports stay lazy: commands that do not touch Azure (--help, validate, schema, skus, image check) must
not import azure.*, torch, jinja2 or the emulator. `infra --help` imports no command at all: its text is
commands/root_help.py's while the sources that draw it are unchanged; every other command line is read by the
typer application of commands/root.py.
"""

import atexit
import os
import sys
import threading

from infra_cli.commands import root_help

INTERRUPTED_AT_START = "Interrupted (Ctrl-C): infra stopped; nothing was changed."


def __getattr__(name: str):
    """`app` (the typer application) is commands/root.py's, built on first use."""
    if name == "app":
        from infra_cli.commands.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # before anything imports azure.ai.ml, which reads it at import time; imported only when the variable is
    # there: --help and validate load nothing more
    if "AZUREML_CURRENT_CLOUD" in os.environ:
        from infra_cli.conventions import forget_inherited_emulator_cloud

        forget_inherited_emulator_cloud()
    if root_help.answered(sys.argv[1:]):
        return
    from infra_cli.commands.root import _COMPLETE_VARIABLE, USAGE_ERROR, app, completion_init

    # Usage errors exit 1, as Terraform's do: click's default 2 would read as "changes present" to a CI
    # job running `infra plan --detailed-exitcode` with a mistyped option.
    USAGE_ERROR.exit_code = 1
    if _COMPLETE_VARIABLE in os.environ:   # the shell asks for completions: typer's classes answer its scripts
        completion_init()
    try:
        app(prog_name="infra")   # "infra" in usage and completion, also under python -m infra_cli
    except KeyboardInterrupt:   # before or after a command ran (one that ran says what it left: root.py)
        print(INTERRUPTED_AT_START, file=sys.stderr)
        sys.exit(130)


def _abandoned_read(thread: threading.Thread) -> bool:
    from infra_cli.azure.protocol import READ_THREADS

    return thread.name.startswith(READ_THREADS)


def run() -> None:
    """The `infra` program (its console script and `python -m infra_cli`): main(), then an exit that skips
    the interpreter's teardown. Freeing every module and object of a short-lived process costs 0.05-0.07 s
    here (a sixth of `infra validate`), and nothing needs it once the exit handlers have run and the
    output is flushed. A process with non-daemon threads still running exits as usual (they are joined)."""
    code: str | int | None   # SystemExit's code: an int, None, or a message printed as sys.exit prints it
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:   # while infra was still starting (importing: a second on a loaded machine)
        print(INTERRUPTED_AT_START, file=sys.stderr)
        code = 130
    # Python joins the threads that are not daemons before it exits, and stops daemon threads wherever
    # they are, as os._exit does: only a live non-daemon thread needs the usual exit. Reads still in flight
    # after Ctrl-C or an error (azure/protocol.py read_pool) are not waited for: they change nothing.
    if any(t.is_alive() and not t.daemon and not _abandoned_read(t) for t in threading.enumerate()
           if t is not threading.main_thread()) or not (code is None or isinstance(code, int)):
        sys.exit(code)
    atexit._run_exitfuncs()   # what normal exit runs first: logging's flush, temporary directories' cleanup
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:   # a full disk, a closed pipe: the output is incomplete, never a success
        from infra_cli.commands.root import EXIT_ERROR

        code = code or EXIT_ERROR
        if not isinstance(exc, BrokenPipeError):   # a reader that stopped (infra plan | head) wants no message
            print(f"error: the output could not be written: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code or 0)
