"""What Rego policies cost a plan (issue 44), in one run:

1. `infra plan STACK --local` (a new process each time, the local state made by a first run) with `--policy none`,
   the baseline measured in the same run, beside the same plan judged by ten policies: the six examples of
   docs/examples/policy/ and four more copies, each in a package of its own (`--namespace p0 ... p9`, ten queries),
   so the difference is what ten policies add to a plan. Plans alternate (run i of each before run i + 1 of any),
   so a machine whose load drifts slows both alike.
2. The policies alone, in-process (plan/policy.py `evaluate` on the plan document `plan --json` printed): the child
   process that runs regopy, its start, the ten modules' compilation and the ten queries, beside the same child
   with one policy, and with none (`python -c pass`, the floor of any child process).

Medians of repeated runs; wall and CPU (user + system) seconds.

    python bench/bench_policy.py [--runs 7] [--stack stacks/ib-a100.yaml | --resources 50]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra_cli.plan.policy import Limits, _read, evaluate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples" / "policy"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ten_policies(folder: Path) -> list[str]:
    """Ten policy files in `folder`, each in a package of its own; the namespaces to pass."""
    examples = sorted(EXAMPLES.glob("*.rego"))
    namespaces = []
    for i in range(10):
        source = examples[i % len(examples)].read_text()
        (folder / f"p{i}.rego").write_text(re.sub(r"^package main$", f"package p{i}", source, flags=re.M))
        namespaces.append(f"p{i}")
    return namespaces


def round_robin(commands: dict[str, list[str]], runs: int, env: dict, cwd: Path) -> dict[str, tuple[float, float]]:
    walls: dict[str, list[float]] = {k: [] for k in commands}
    cpus: dict[str, list[float]] = {k: [] for k in commands}
    for command in commands.values():   # not counted: file caches, the local state's first start
        subprocess.run(command, env=env, cwd=cwd, capture_output=True)
    for _ in range(runs):
        for label, command in commands.items():
            t, c = time.perf_counter(), _children_cpu()
            done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
            walls[label].append(time.perf_counter() - t)
            cpus[label].append(_children_cpu() - c)
            if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr:
                raise SystemExit(f"{label} failed: {done.stderr[-1000:]}")
    return {k: (statistics.median(walls[k]), statistics.median(cpus[k])) for k in commands}


def timed(call, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    call()
    for _ in range(runs):
        t, c = time.perf_counter(), _children_cpu()
        call()
        walls.append(time.perf_counter() - t)
        cpus.append(_children_cpu() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--stack", default=str(ROOT / "stacks" / "ib-a100.yaml"))
    parser.add_argument("--resources", type=int, default=0,
                        help="instead of --stack: a stack of N clusters and environments (bench/bench_plan.py's)")
    args = parser.parse_args()
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / ".git").mkdir()
        stack = project / "stack.yaml"
        if args.resources:
            from bench_plan import stack_text   # noqa: E402 (bench/ is on sys.path: this script's folder)
            stack.write_text(stack_text(args.resources, "policy"))
            args.stack = f"{args.resources} resources"
        else:
            stack.write_text(Path(args.stack).read_text())
        policies = project / "policies"
        policies.mkdir()
        namespaces = ten_policies(policies)
        env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL",)}
        env["INFRA_LOCAL_DIR"] = str(project / "local")
        plan = [sys.executable, "-m", "infra_cli", "plan", str(stack), "--local"]
        ns = [a for n in namespaces for a in ("--namespace", n)]
        commands = {"plan --policy none": plan + ["--policy", "none"],
                    "plan + 10 policies": plan + ["--policy", str(policies), *ns]}
        results = round_robin(commands, args.runs, env, project)
        print(f"1. {Path(args.stack).name}: infra plan --local, median of {args.runs} runs ({load})")
        for label, (w, c) in results.items():
            print(f"  {label:<24} {w:6.3f} s wall  {c:6.3f} s CPU")
        (bw, bc), (pw, pc) = results["plan --policy none"], results["plan + 10 policies"]
        print(f"  ten policies add {pw - bw:+.3f} s wall ({(pw / bw - 1) * 100:+.0f}%), {pc - bc:+.3f} s CPU\n")

        done = subprocess.run(plan + ["--policy", "none", "--json"], env=env, cwd=project, capture_output=True,
                              text=True)
        document = json.loads(done.stdout)
        ten, _ = _read(sorted(policies.glob("*.rego")))
        one, _ = _read([policies / "p0.rego"])
        limits = Limits()
        found = evaluate(document, ten, namespaces, limits)
        assert not [d for d in found if d.rule in ("policy.failed", "policy.invalid", "policy.error")], found
        rows = {"evaluate: 10 policies, 10 packages": timed(lambda: evaluate(document, ten, namespaces, limits),
                                                             args.runs),
                "evaluate: 1 policy": timed(lambda: evaluate(document, one, ["p0"], limits), args.runs),
                "python -c pass": timed(lambda: subprocess.run([sys.executable, "-c", "pass"]), args.runs)}
        print(f"2. the policies alone (plan document of {len(json.dumps(document)) // 1024} KiB), median of "
              f"{args.runs} runs ({found and len(found)} results)")
        for label, (w, c) in rows.items():
            print(f"  {label:<36} {w:6.3f} s wall  {c:6.3f} s CPU (child)")


if __name__ == "__main__":
    main()
