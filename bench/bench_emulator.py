"""How much do injected faults cost the SDK? Median wall time of compute.get through the real MLClient
against the emulator, without faults (the baseline) and under 20% injected 429/500 (Retry-After: 1 s).

    python bench/bench_emulator.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from azure.ai.ml.entities import AmlCompute

from infra_cli.azure.clients import build_clients
from infra_cli.emulator.faults import FaultConfig
from infra_cli.emulator.server import EmulatorServer
from infra_cli.stack.model import Workspace

WORKSPACE = Workspace(subscription_id="00000000-0000-0000-0000-0000000000b1", resource_group="rg", name="ws",
                      location="eastus")


def measure(faults: FaultConfig, runs: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp, EmulatorServer(Path(tmp), faults=faults) as server:
        clients = build_clients(WORKSPACE, local=True, emulator=server)
        clients.ml.compute.begin_create_or_update(AmlCompute(name="gpu", size="Standard_ND96asr_v4",
                                                             max_instances=2)).result()
        server.stats.reset()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            clients.ml.compute.get("gpu")
            times.append(time.perf_counter() - start)
        return statistics.median(times), server.stats.by_status()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    base, base_status = measure(FaultConfig(provisioning_delay_s=0.1), runs)
    faulty, faulty_status = measure(FaultConfig(provisioning_delay_s=0.1, throttle_rate=0.1, error_rate=0.1, seed=3),
                                    runs)
    print(f"compute.get median over {runs} runs: baseline {base * 1000:.1f} ms ({base_status}); "
          f"under 20% 429/500 {faulty * 1000:.1f} ms ({faulty_status})")


if __name__ == "__main__":
    main()
