"""Plan wall time and request count for stacks of 1, 10 and 50 clusters+environments, against the local
emulator with 100 ms injected latency per request (the real SDK clients over HTTPS).

Goal (issue 4): the 50-resource plan takes no more than 2x the 1-resource plan, because refresh is
concurrent and uses list calls, not a loop of GETs. Prints the median of repeated runs; the 1-resource plan is
the baseline measured in the same run.

    python bench/bench_plan.py [--runs 5] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra_cli.azure.clients import build_clients  # noqa: E402
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmulatorServer(Path(tmp) / "state", faults=FaultConfig(latency_s=args.latency)).start()
        try:
            rows = []
            for n in (1, 10, 50):
                path = Path(tmp) / f"stack{n}.yaml"
                path.write_text(stack_text(n))
                loaded = load_stack(path)
                clients = build_clients(loaded.stack.workspace, local=True, emulator=server)
                plan_stack(loaded, clients)  # warm-up: connections, SDK caches
                times, requests = [], []
                for _ in range(args.runs):
                    server.stats.reset()
                    t = time.perf_counter()
                    outcome = plan_stack(loaded, clients)
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
    print(f"goal: 50-resource plan <= 2x the 1-resource plan: {'met' if ratio <= 2 else 'NOT met'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
