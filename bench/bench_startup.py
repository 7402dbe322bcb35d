"""Cold start-up of the offline commands, median of repeated runs, next to `python -c pass` and the imports
every command pays for (typer, pydantic), measured in the same run.

    python bench/bench_startup.py [--runs 15]

Goal (issue 2): `infra --help` and `infra validate stacks/ib-a100.yaml` under 0.3 s each on the dev machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 0.3

CASES = [
    ("python -c pass (baseline)", ["-c", "pass"], False),
    ("python -c 'import typer'", ["-c", "import typer"], False),
    ("python -c 'import pydantic'", ["-c", "import pydantic"], False),
    ("infra --help", ["-m", "infra_cli", "--help"], True),
    ("infra validate stacks/ib-a100.yaml", ["-m", "infra_cli", "validate", "stacks/ib-a100.yaml"], True),
    ("infra validate stacks/*.yaml", ["-m", "infra_cli", "validate", *sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "stacks").glob("*.yaml"))], False),
    ("infra schema", ["-m", "infra_cli", "schema"], False),
    ("infra skus", ["-m", "infra_cli", "skus"], False),
]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall_times(args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) per run. CPU time is the steadier figure on a busy machine."""
    walls, cpus = [], []
    for _ in range(runs):
        cpu0, start = _children_cpu(), time.perf_counter()
        done = subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu0)
        if done.returncode != 0:
            raise SystemExit(f"{args} failed: {done.stderr.decode()[-500:]}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    wall_times(["-m", "infra_cli", "--help"], 2)  # warm the page cache and .pyc files: we measure cold processes
    print(f"{'command':40} {'median s':>9} {'min s':>7} {'- baseline':>10} {'cpu s':>7}  goal (median wall)")
    baseline = None
    failed = False
    for label, args, has_goal in CASES:
        times, cpus = wall_times(args, runs)
        median = statistics.median(times)
        baseline = median if baseline is None else baseline
        verdict = ""
        if has_goal:
            verdict = f"< {GOAL_S} s: " + ("ok" if median < GOAL_S else "MISSED")
            failed |= median >= GOAL_S
        print(f"{label:40} {median:9.3f} {min(times):7.3f} {median - baseline:10.3f} "
              f"{statistics.median(cpus):7.3f}  {verdict}")
    load = os.getloadavg()[0]
    print(f"({runs} runs each, {sys.executable} {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {load:.2f}{': busy machine, wall times inflated' if load > 1 else ''})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
