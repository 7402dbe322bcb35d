"""Plan speed, in one run:

1. `infra plan stacks/ib-a100.yaml --local` wall time (a new process each time, the local state made by a first
   run, as a user's second plan finds it; bytecode cached as for an installed package, bench/bytecode_cache.py),
   next to `python -c pass` and `terraform -help` when terraform is on PATH. Goal (issue 15): <= 0.6 s on a
   2-core machine.
2. Plan wall time and request count for stacks of 1, 10 and 50 clusters+environments against the emulator with
   100 ms injected latency per request (the lean REST reader over HTTPS). Goal (issue 15): the 50-resource plan
   within 1.2x of the 1-resource plan, with the same number of requests: refresh is one round of concurrent
   list calls. Medians of repeated runs; the 1-resource plan is the baseline measured in the same run.

    python bench/bench_plan.py [--runs 5] [--latency 0.1]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bytecode_cache import cached_bytecode_env  # noqa: E402  (bench/ is on sys.path: this script's folder)
from infra_cli.commands.backend import build_clients  # noqa: E402
from infra_cli.azure.provider import AzureProvider  # noqa: E402
from infra_cli.emulator.faults import FaultConfig  # noqa: E402
from infra_cli.emulator.server import EmulatorServer  # noqa: E402
from infra_cli.plan.engine import plan_stack  # noqa: E402
from infra_cli.stack.load import load_stack  # noqa: E402

HEAD = """stack: bench
workspace: {subscription_id: 00000000-0000-0000-0000-0000000000b1, resource_group: rg, name: mlw, location: eastus}
"""


def stack_text(resources: int) -> str:
    clusters = (resources + 1) // 2
    envs = resources - clusters
    out = [HEAD, "clusters:\n"]
    out += [f"  c{i}: {{size: Standard_NC24s_v3, max_instances: 1}}\n" for i in range(clusters)]
    if envs:
        out.append("environments:\n")
        out += [f"  e{i}: {{image: 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:{i}'}}\n" for i in range(envs)]
    return "".join(out)


ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(command: list[str], runs: int, env: dict | None = None, cwd: Path | None = None) -> tuple[float, float]:
    """Median wall and CPU (user + system) seconds of `command`, after one run that is not counted (file caches,
    local state). CPU time is the steadier figure on a loaded machine: waiting for a core counts in wall time only."""
    times, cpu = [], []
    for i in range(runs + 1):
        t, c = time.perf_counter(), _children_cpu()
        subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if i:
            times.append(time.perf_counter() - t)
            cpu.append(_children_cpu() - c)
    return statistics.median(times), statistics.median(cpu)


def cli_plan(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, cached_bytecode_env() as env:
        env["INFRA_LOCAL_DIR"] = str(Path(tmp) / "local")
        env.pop("INFRA_EMULATOR_URL", None)
        infra = [sys.executable, "-m", "infra_cli", "plan", str(ROOT / "stacks" / "ib-a100.yaml"), "--local"]
        rows = [("infra plan stacks/ib-a100.yaml --local", wall(infra, runs, env, ROOT)),
                ("python -c pass", wall([sys.executable, "-c", "pass"], runs, env))]
        terraform = shutil.which("terraform")
        rows.append(("terraform -help", wall([terraform, "-help"], runs)) if terraform
                    else ("terraform -help", None))
    print(f"command wall time and CPU time (user + system), median of {runs} runs ({os.cpu_count()} CPUs)")
    for name, seconds in rows:
        print(f"  {name:<42} " + ("not installed" if seconds is None else f"{seconds[0]:6.3f} s wall  {seconds[1]:6.3f} s CPU"))
    plan_s, plan_cpu = rows[0][1]
    print(f"  (system load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; a loaded machine inflates wall time)")
    print(f"goal: plan <= 0.6 s: {'met' if plan_s <= 0.6 else 'NOT met'} ({plan_s:.3f} s wall, {plan_cpu:.3f} s CPU, "
          f"{plan_s / rows[1][1][0]:.0f}x python -c pass)\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    cli_plan(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmulatorServer(Path(tmp) / "state", faults=FaultConfig(latency_s=args.latency)).start()
        try:
            rows = []
            for n in (1, 10, 50):
                path = Path(tmp) / f"stack{n}.yaml"
                path.write_text(stack_text(n))
                loaded = load_stack(path)
                provider = AzureProvider(build_clients(loaded.stack.workspace, local=True, emulator=server))
                plan_stack(loaded, provider)  # warm-up: connections, token
                times, requests = [], []
                for _ in range(args.runs):
                    server.stats.reset()
                    t = time.perf_counter()
                    outcome = plan_stack(loaded, provider)
                    times.append(time.perf_counter() - t)
                    requests.append(server.stats.total)
                assert len(outcome.plan.resource_changes) == n
                rows.append((n, statistics.median(times), statistics.median(requests)))
        finally:
            server.stop()
    base = rows[0][1]
    print(f"plan against the emulator, {args.latency * 1000:.0f} ms latency per request, median of {args.runs} runs")
    print(f"{'resources':>9}  {'wall s':>7}  {'x 1-resource':>12}  {'requests':>8}")
    for n, wall, reqs in rows:
        print(f"{n:>9}  {wall:7.3f}  {wall / base:12.2f}  {reqs:8.0f}")
    ratio = rows[-1][1] / base
    # the 1-resource stack has no environment, so no environment list: requests must not grow from 10 to 50
    same = rows[-1][2] == rows[1][2]
    print(f"goal: 50-resource plan <= 1.2x the 1-resource plan, requests not growing with resources (10 -> 50): "
          f"{'met' if ratio <= 1.2 and same else 'NOT met'} ({ratio:.2f}x; {rows[1][2]:.0f} -> {rows[-1][2]:.0f} requests)")
    print(f"(system load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
