"""Does one apply converge when Azure throttles, fails requests and fails long-running operations, and what
does that cost? Each run applies a fresh 3-cluster stack once (plan, lock, apply, unlock, as `infra apply`
does) and then plans again: converged means the apply reported success AND the next plan is "No changes".
Fault-free runs (the baseline) and faulty runs are interleaved in the same process, so both see the same
machine load.

    python bench/bench_faults.py [--runs 20] [--throttle-rate 0.3] [--error-rate 0.1] [--lro-failure-rate 0.2]
                                 [--retry-after 1] [--provisioning-delay 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra_cli.apply.engine import apply_outcome  # noqa: E402
from infra_cli.commands.backend import build_clients  # noqa: E402
from infra_cli.emulator.faults import FaultConfig  # noqa: E402
from infra_cli.emulator.server import EmulatorServer  # noqa: E402
from infra_cli.azure.provider import AzureProvider  # noqa: E402
from infra_cli.plan.engine import plan_stack  # noqa: E402
from infra_cli.stack.load import load_stack  # noqa: E402

STACK = """
stack: bench-faults
workspace:
  subscription_id: 00000000-0000-0000-0000-0000000000f1
  resource_group: rg-bench
  name: mlw-bench
  location: eastus
clusters:
  a100:
    size: Standard_ND96asr_v4
    max_instances: 2
  a100-80:
    size: Standard_ND96amsr_A100_v4
    max_instances: 2
  nca100:
    size: Standard_NC24ads_A100_v4
    max_instances: 4
"""


def one_run(faults: FaultConfig) -> tuple[bool, float, int, str]:
    """(converged, seconds for plan + apply + the checking plan, requests the emulator answered, why not)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stack.yaml"
        path.write_text(STACK)
        with EmulatorServer(Path(tmp) / "state", faults=faults) as server:
            start = time.perf_counter()
            try:
                loaded = load_stack(path)
                clients = build_clients(loaded.stack.workspace, local=True, emulator=server)
                result = apply_outcome(plan_stack(loaded, AzureProvider(clients)))
                after = plan_stack(load_stack(path), AzureProvider(clients)).plan
                why = ("; ".join(f"{f.address}: {f.code}" for f in result.failures) if not result.ok else
                       f"next plan has {len(after.changes)} change(s)" if after.changes or after.has_errors() else "")
            except Exception as exc:  # a plan or the lock that ran out of retries: not converged, say why
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return not why, time.perf_counter() - start, server.stats.total, why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--throttle-rate", type=float, default=0.3)
    parser.add_argument("--error-rate", type=float, default=0.1)
    parser.add_argument("--lro-failure-rate", type=float, default=0.2)
    parser.add_argument("--retry-after", type=int, default=1, help="the Retry-After (s) a 429 carries")
    parser.add_argument("--provisioning-delay", type=float, default=0.5, help="seconds a create/delete takes")
    args = parser.parse_args()

    one_run(FaultConfig(provisioning_delay_s=args.provisioning_delay))   # warm-up: imports, first connections
    baseline, faulty = [], []
    for run in range(args.runs):
        baseline.append(one_run(FaultConfig(provisioning_delay_s=args.provisioning_delay)))
        faulty.append(one_run(FaultConfig(
            throttle_rate=args.throttle_rate, error_rate=args.error_rate, lro_failure_rate=args.lro_failure_rate,
            retry_after_s=args.retry_after, provisioning_delay_s=args.provisioning_delay, seed=run)))
        ok, seconds, requests, why = faulty[-1]
        print(f"run {run + 1:2d}: baseline {baseline[-1][1]:5.1f} s; faulty {seconds:5.1f} s, {requests} requests, "
              f"{'converged' if ok else 'NOT converged: ' + why}", flush=True)

    def summary(runs: list[tuple[bool, float, int, str]]) -> str:
        converged = sum(r[0] for r in runs)
        return (f"{converged}/{len(runs)} converged in one apply, median {statistics.median(r[1] for r in runs):.1f} s, "
                f"median {statistics.median(r[2] for r in runs):.0f} requests")

    print(f"\n3-cluster stack, plan + apply + checking plan, {args.runs} runs each:")
    print(f"  baseline (no faults):  {summary(baseline)}")
    print(f"  {args.throttle_rate:.0%} 429 (Retry-After {args.retry_after} s) + {args.error_rate:.0%} 500 + "
          f"{args.lro_failure_rate:.0%} failed operations:  {summary(faulty)}")
    cost = statistics.median(r[1] for r in faulty) / statistics.median(r[1] for r in baseline)
    print(f"  cost of the faults: {cost:.1f}x the baseline's median time")


if __name__ == "__main__":
    main()
