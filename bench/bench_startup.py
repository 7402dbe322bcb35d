"""Cold start-up of the offline commands, median of repeated runs, next to `python -c pass` and the imports
every command pays for (typer, yaml), measured in the same run; `import pydantic` shows what infra no longer
loads (typer would, to read command-line values: infra_cli/commands/params.py).

    python bench/bench_startup.py [--runs 15] [--no-bytecode]

Goals on the dev machine: `infra validate stacks/ib-a100.yaml` under 0.3 s (issues 2 and 11), `infra --help`
under 0.15 s (issue 16); as ratios measured in the same run (issue 25): `infra --help` / `terraform -help` <= 1.3x
(when terraform is on PATH), `infra plan stacks/ib-a100.yaml --local` / `python -c pass` <= 10x (the local state
made by the warm-up run, as a user's second plan finds it).

The processes are cold but their modules' bytecode is cached (in a private PYTHONPYCACHEPREFIX the warm-up
runs fill), as for an installed package: pip compiles it at install. In an environment that sets
PYTHONDONTWRITEBYTECODE, a source checkout compiles infra_cli in every run instead: --no-bytecode measures
that (about 0.08 s more for `infra validate`).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode_cache import cached_bytecode_env

ROOT = Path(__file__).resolve().parent.parent
# The command-line parser and the YAML reader every stack needs: the floor under `infra validate` that infra's
# own code cannot lower (typer's pydantic coercion is not built: infra_cli/commands/params.py).
_COMMAND_FLOOR = "import typer, yaml"

CASES = [  # label, interpreter arguments, goal in seconds (median wall) or None
    ("python -c pass (baseline)", ["-c", "pass"], None),
    ("python -c 'import typer'", ["-c", "import typer"], None),
    ("python -c 'import pydantic'", ["-c", "import pydantic"], None),
    ("python -c 'import typer, yaml' (floor)", ["-c", _COMMAND_FLOOR], None),
    ("infra --help", ["-m", "infra_cli", "--help"], 0.15),
    ("infra validate stacks/ib-a100.yaml", ["-m", "infra_cli", "validate", "stacks/ib-a100.yaml"], 0.3),
    ("infra validate stacks/*.yaml", ["-m", "infra_cli", "validate", *sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "stacks").glob("*.yaml"))], None),
    ("infra schema", ["-m", "infra_cli", "schema"], None),
    ("infra skus", ["-m", "infra_cli", "skus"], None),
    ("infra plan stacks/ib-a100.yaml --local", ["-m", "infra_cli", "plan", "stacks/ib-a100.yaml", "--local"], None),
]
TERRAFORM = shutil.which("terraform")
if TERRAFORM:   # not Python: run as it is (wall_times runs the interpreter for every other case)
    CASES.append(("terraform -help", [TERRAFORM, "-help"], None))
# (figure, baseline, goal): the ratio of their median wall times, both measured in this run
RATIOS = [("infra --help", "terraform -help", 1.3),
          ("infra plan stacks/ib-a100.yaml --local", "python -c pass (baseline)", 10.0)]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall_times(args: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) per run. CPU time is the steadier figure on a busy machine."""
    walls, cpus = [], []
    for _ in range(runs):
        cpu0, start = _children_cpu(), time.perf_counter()
        command = args if args[0] == TERRAFORM else [sys.executable, *args]
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu0)
        if done.returncode != 0 and args[0] != TERRAFORM:   # terraform before 0.15 exits 127 on -help
            raise SystemExit(f"{args} failed: {done.stderr.decode()[-500:]}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="run as a shell with PYTHONDONTWRITEBYTECODE set does: modules without a __pycache__ "
                        "beside them (a source checkout's) are compiled in every run")
    options = parser.parse_args()
    if options.no_bytecode:
        _measure(options.runs, dict(os.environ), True)
        return
    with cached_bytecode_env() as env, tempfile.TemporaryDirectory() as local:
        env["INFRA_LOCAL_DIR"] = local   # the plan's local emulator state, made by the warm-up run
        env.pop("INFRA_EMULATOR_URL", None)
        _measure(options.runs, env, False)


def _measure(runs: int, env: dict[str, str], no_bytecode: bool) -> None:
    for _, args, _ in CASES:  # warm the page cache and write the bytecode: we measure cold processes
        wall_times(args, 1, env)
    print(f"{'command':40} {'median s':>9} {'min s':>7} {'- baseline':>10} {'cpu s':>7}  goal (median wall)")
    baseline = None
    failed = False
    # Round-robin: run i of every case comes before run i + 1 of any, so a machine that slows down for a
    # while (this one's speed drifts by 15%) slows every case alike instead of the few measured then.
    measured = {label: ([], []) for label, _, _ in CASES}
    for _ in range(runs):
        for label, args, _ in CASES:
            walls, cpus = wall_times(args, 1, env)
            measured[label][0].extend(walls)
            measured[label][1].extend(cpus)
    for label, args, goal in CASES:
        times, cpus = measured[label]
        median = statistics.median(times)
        baseline = median if baseline is None else baseline
        verdict = ""
        if goal is not None:
            verdict = f"< {goal} s: " + ("ok" if median < goal else "MISSED")
            failed |= median >= goal
        print(f"{label:40} {median:9.3f} {min(times):7.3f} {median - baseline:10.3f} "
              f"{statistics.median(cpus):7.3f}  {verdict}")
    medians = {label: statistics.median(measured[label][0]) for label, _, _ in CASES}
    for figure, base, goal in RATIOS:
        if base in medians:
            ratio = medians[figure] / medians[base]
            print(f"{figure} / {base}: {ratio:.2f}x ({medians[figure]:.3f} s / {medians[base]:.3f} s; goal <= {goal}x: "
                  f"{'met' if ratio <= goal else 'NOT met'})")
    load = os.getloadavg()[0]
    print(f"({runs} runs each, {sys.executable} {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {load:.2f}{': busy machine, wall times inflated' if load > 1 else ''}; "
          f"{'compiled from source in every run' if no_bytecode else 'bytecode cached'})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
