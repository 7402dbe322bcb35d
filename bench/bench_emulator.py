"""The emulator as the SDKs see it.

1. How long an SDK user waits on a long-running operation: median wall time of an AmlCompute create through a
   plain azure-ai-ml MLClient (built as `infra emulator serve` prints, with the SDK's default LRO polling, not
   infra's) against the emulator served in a child process with serve's defaults (2 s provisioning), next to
   the same create through infra's own clients (what `infra apply` waits). Before this bench's change the
   create answered no Retry-After and the SDK slept its default 30 s: the baseline printed beside it.
2. How much injected faults cost: median compute.get through infra's client, without faults and under 20%
   injected 429/500 (Retry-After: 1 s).

    python bench/bench_emulator.py [--runs 5] [--get-runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azure.ai.ml.entities import AmlCompute

from infra_cli.commands.backend import build_clients
from infra_cli.emulator.faults import FaultConfig
from infra_cli.emulator.server import EmulatorServer
from infra_cli.stack.model import Workspace

WORKSPACE = Workspace(subscription_id="00000000-0000-0000-0000-0000000000b1", resource_group="rg", name="ws",
                      location="eastus")
# Measured on this machine before the emulator answered its LROs with a Retry-After (median of 3 SDK creates).
BASELINE_SDK_CREATE_S = 31.3
# What `infra emulator serve` runs (its defaults), in a child process so the SDK's client shares no GIL with it.
_SERVE = """
import sys
from pathlib import Path
from infra_cli.emulator.faults import FaultConfig
from infra_cli.emulator.server import EmulatorServer
server = EmulatorServer(Path(sys.argv[1]), 0, FaultConfig(provisioning_delay_s=2.0)).start()
server.ensure_workspace(*sys.argv[2:6])
print(server.url, flush=True)
server.serve_forever()
"""


def _served(state: Path) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([sys.executable, "-c", _SERVE, str(state), WORKSPACE.subscription_id,
                              WORKSPACE.resource_group, WORKSPACE.name, WORKSPACE.location],
                             stdout=subprocess.PIPE, text=True)
    return child, child.stdout.readline().strip()


def _sdk_client(url: str, state: Path):
    """MLClient as `infra emulator serve` tells a user to build it: no polling interval of infra's."""
    from azure.ai.ml import MLClient

    from infra_cli.azure.credentials import LocalCredential

    port = url.rstrip("/").rsplit(":", 1)[1]
    return MLClient(LocalCredential((state / "token").read_text().strip()), WORKSPACE.subscription_id,
                    WORKSPACE.resource_group, WORKSPACE.name, cloud=f"BenchEmulator{port}",
                    cloud_metadata={"resource_manager": url, "azure_portal": url, "active_directory": url,
                                    "aml_resource_id": url, "storage_endpoint": "core.windows.net",
                                    "registry_discovery_endpoint": url},
                    connection_verify=str(state / "cert.pem"), show_progress=False, enable_telemetry=False)


def sdk_create(runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        child, url = _served(state)
        try:
            ml = _sdk_client(url, state)
            times = []
            for i in range(runs):
                start = time.perf_counter()
                ml.compute.begin_create_or_update(AmlCompute(name=f"gpu{i}", size="Standard_ND96asr_v4",
                                                             max_instances=1)).result()
                times.append(time.perf_counter() - start)
            return times
        finally:
            child.terminate()
            child.wait(timeout=10)


def infra_create(runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp, \
            EmulatorServer(Path(tmp), faults=FaultConfig(provisioning_delay_s=2.0)) as server:
        clients = build_clients(WORKSPACE, local=True, emulator=server)
        times = []
        for i in range(runs):
            start = time.perf_counter()
            clients.ml.compute.begin_create_or_update(AmlCompute(name=f"gpu{i}", size="Standard_ND96asr_v4",
                                                                 max_instances=1)).result()
            times.append(time.perf_counter() - start)
        return times


def measure_get(faults: FaultConfig, runs: int) -> tuple[float, dict]:
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
    parser.add_argument("--runs", type=int, default=5, help="creates per client")
    parser.add_argument("--get-runs", type=int, default=30)
    args = parser.parse_args()
    sdk = statistics.median(sdk_create(args.runs))
    own = statistics.median(infra_create(args.runs))
    print(f"AmlCompute create, 2 s provisioning, median of {args.runs}: azure-ai-ml MLClient {sdk:.2f} s "
          f"(baseline before Retry-After: {BASELINE_SDK_CREATE_S:.1f} s); infra's clients {own:.2f} s")
    base, base_status = measure_get(FaultConfig(provisioning_delay_s=0.1), args.get_runs)
    faulty, faulty_status = measure_get(FaultConfig(provisioning_delay_s=0.1, throttle_rate=0.1, error_rate=0.1,
                                                    seed=3), args.get_runs)
    print(f"compute.get median over {args.get_runs} runs: baseline {base * 1000:.1f} ms ({base_status}); "
          f"under 20% 429/500 {faulty * 1000:.1f} ms ({faulty_status})")


if __name__ == "__main__":
    main()
