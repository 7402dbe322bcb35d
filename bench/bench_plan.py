"""Plan speed, in one run:

1. `infra plan stacks/ib-a100.yaml --local` wall time (a new process each time, the local state made by a first
   run, as a user's second plan finds it; bytecode cached as for an installed package, bench/bytecode_cache.py),
   next to `python -c pass` and `terraform -help` when terraform is on PATH.
2. `infra plan` (a new process each time) of stacks of 1, 10 and 50 clusters+environments against an emulator
   served as `infra emulator serve --latency 0.1` serves it (100 ms added to every request), before the stack is
   applied (nothing live) and after (everything live): wall time and the requests the emulator answered, as list
   calls and single reads. Goal (issue 25): the 50-resource plan within 1.2x of the 1-resource plan, the
   baseline measured in the same run; list calls not growing with the stack; single reads only for what no
   list carries (an environment version's tags: Azure lists versions per environment only).
3. The 110-resource stack (10 clusters, 100 environments), `--local`, no latency: plan before and after apply.
4. What the version reads of that stack, applied, cost in-process (one provider, a fresh transport each run, as a
   plan process has): the provider's pool of 4 threads beside 32, TLS session resumption on and off, against the
   emulator with no latency and with the served latency; connections opened (resumed) by the last run.

Medians of repeated runs.

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
from infra_cli.emulator.faults import FaultConfig  # noqa: E402
from infra_cli.emulator.server import EmulatorServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIZE = "Standard_D4s_v3"   # offered in eastus by the emulator's world, with quota for 50 nodes


def stack_text(resources: int, name: str = "bench", clusters: int | None = None) -> str:
    """A stack of `resources` clusters and environments (half each, the odd one a cluster), its own workspace."""
    clusters = (resources + 1) // 2 if clusters is None else clusters
    envs = resources - clusters
    out = [f"stack: {name}\nworkspace: {{subscription_id: 00000000-0000-0000-0000-0000000000b1, resource_group: rg, "
           f"name: ws-{name}, location: eastus}}\nclusters:\n"]
    out += [f"  cpu{i:03d}: {{size: {SIZE}, max_instances: 1}}\n" for i in range(clusters)]
    if envs:
        out.append("environments:\n")
        out += [f"  env{i:03d}: {{image: 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:{i}'}}\n"
                for i in range(envs)]
    return "".join(out)


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


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def cli_plan(runs: int, env: dict) -> float:
    """Section 1; returns `python -c pass`'s median wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**env, "INFRA_LOCAL_DIR": str(Path(tmp) / "local")}
        env.pop("INFRA_EMULATOR_URL", None)
        infra = [sys.executable, "-m", "infra_cli", "plan", str(ROOT / "stacks" / "ib-a100.yaml"), "--local"]
        rows = [("infra plan stacks/ib-a100.yaml --local", wall(infra, runs, env, ROOT)),
                ("python -c pass", wall([sys.executable, "-c", "pass"], runs, env))]
        terraform = shutil.which("terraform")
        rows.append(("terraform -help", wall([terraform, "-help"], runs)) if terraform
                    else ("terraform -help", None))
    print(f"command wall time and CPU time (user + system), median of {runs} runs")
    for name, seconds in rows:
        print(f"  {name:<42} " + ("not installed" if seconds is None else f"{seconds[0]:6.3f} s wall  {seconds[1]:6.3f} s CPU"))
    plan_s, floor = rows[0][1][0], rows[1][1][0]
    print(f"  plan / python -c pass: {plan_s / floor:.1f}x (goal <= 10x)   ({_load()})\n")
    return floor


def _requests(server: EmulatorServer) -> tuple[int, int]:
    """(list calls, single reads) the emulator answered since its stats were reset: a GET whose answer is a list
    is one whose path ends in a collection (computes, environments, versions, skus, usages)."""
    lists = singles = 0
    for r in server.stats.records:
        last = r.path.rstrip("/").rsplit("/", 1)[-1].lower()
        if last in ("computes", "environments", "versions", "skus", "usages"):
            lists += 1
        else:
            singles += 1
    return lists, singles


def _apply(path: Path, env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "infra_cli", "apply", str(path), "--local", "--auto-approve",
                           "--no-smoke"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"apply of {path.name} failed: {done.stderr[-1000:]}")
    return time.perf_counter() - t


def _round_robin(plans: dict, runs: int, env: dict, server: EmulatorServer | None = None) -> dict:
    """label -> (median wall s, median CPU s, (list calls, single reads) of the last run). Run i of every plan comes
    before run i + 1 of any, so a machine whose load drifts slows each alike (the ratios stay meaningful)."""
    walls: dict = {k: [] for k in plans}
    cpus: dict = {k: [] for k in plans}
    counts: dict = {}
    for command in plans.values():   # not counted: file caches
        subprocess.run(command, env=env, capture_output=True)
    for _ in range(runs):
        for label, command in plans.items():
            if server is not None:
                server.stats.reset()
            t, c = time.perf_counter(), _children_cpu()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            walls[label].append(time.perf_counter() - t)
            cpus[label].append(_children_cpu() - c)
            if done.returncode != 0:
                raise SystemExit(f"{label} failed: {done.stderr[-1000:]}")
            if server is not None:
                counts[label] = _requests(server)
    return {k: (statistics.median(walls[k]), statistics.median(cpus[k]), counts.get(k)) for k in plans}


def served_plans(runs: int, latency: float, env: dict) -> None:
    """Section 2: `infra plan` processes against a served emulator, before and after apply, sizes round-robin."""
    sizes = (1, 10, 50)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmulatorServer(Path(tmp) / "state", faults=FaultConfig(provisioning_delay_s=0)).start()
        env = {**env, "INFRA_EMULATOR_URL": server.url, "INFRA_LOCAL_DIR": str(server.state_dir)}
        paths = {n: Path(tmp) / f"stack{n}.yaml" for n in sizes}
        for n, path in paths.items():
            path.write_text(stack_text(n, f"bench{n}"))
        plans = {n: [sys.executable, "-m", "infra_cli", "plan", str(p), "--local"] for n, p in paths.items()}
        try:
            server.faults = FaultConfig(latency_s=latency, provisioning_delay_s=0)
            before = _round_robin(plans, runs, env, server)
            server.faults = FaultConfig(provisioning_delay_s=0)
            for path in paths.values():
                _apply(path, env)
            server.faults = FaultConfig(latency_s=latency, provisioning_delay_s=0)
            after = _round_robin(plans, runs, env, server)
        finally:
            server.stop()
    print(f"infra plan against a served emulator, {latency * 1000:.0f} ms latency per request, median of {runs} runs "
          "(sizes round-robin)")
    print(f"  {'':13} {'resources':>9}  {'wall s':>7}  {'CPU s':>6}  {'x 1-resource':>12}  {'list calls':>10}  "
          f"{'single reads':>12}")
    for phase, rows in (("before apply", before), ("after apply", after)):
        base = rows[1][0]
        for n in sizes:
            seconds, cpu, (lists, singles) = rows[n]
            print(f"  {phase:13} {n:>9}  {seconds:7.3f}  {cpu:6.3f}  {seconds / base:12.2f}  {lists:10}  {singles:12}")
        ratio = rows[50][0] / base
        growing = rows[10][2][0] != rows[50][2][0]
        print(f"  {phase}: 50-resource plan {ratio:.2f}x the 1-resource plan (goal <= 1.2x: "
              f"{'met' if ratio <= 1.2 else 'NOT met'}); list calls 10 -> 50: {rows[10][2][0]} -> {rows[50][2][0]} "
              f"({'GROWING' if growing else 'not growing'})")
    print(f"  ({_load()})\n")


def local_110(runs: int, env: dict) -> None:
    """Section 3: the issue's 110-resource stack, --local (the emulator in the command's process), no latency: the
    same stack in two workspaces, one applied, planned round-robin."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**env, "INFRA_LOCAL_DIR": str(Path(tmp) / "local"), "INFRA_EMULATOR_PROVISIONING_DELAY": "0"}
        env.pop("INFRA_EMULATOR_URL", None)
        paths = {phase: Path(tmp) / f"{phase}.yaml" for phase in ("before", "after")}
        for phase, path in paths.items():
            path.write_text(stack_text(110, f"bench110{phase}", clusters=10))
        applied = _apply(paths["after"], env)
        rows = _round_robin({phase: [sys.executable, "-m", "infra_cli", "plan", str(p), "--local"]
                             for phase, p in paths.items()}, runs, env)
    (before, before_cpu, _), (after, after_cpu, _) = rows["before"], rows["after"]
    print(f"110 resources (10 clusters, 100 environments), infra plan --local, no latency, median of {runs} runs")
    print(f"  before apply {before:6.3f} s wall {before_cpu:6.3f} s CPU; after apply {after:6.3f} s wall "
          f"{after_cpu:6.3f} s CPU ({after / before:.2f}x); apply {applied:.1f} s   ({_load()})")


def read_batch(runs: int, latency: float) -> None:
    """Section 4: provider.read_environments of 100 applied environments, configurations interleaved."""
    from infra_cli.azure import provider as provider_module
    from infra_cli.azure.clients import EmulatorTarget, local_clients
    from infra_cli.azure.loopback import LoopbackTransport
    from infra_cli.stack.load import load_stack

    with tempfile.TemporaryDirectory() as tmp:
        server = EmulatorServer(Path(tmp) / "state", faults=FaultConfig(provisioning_delay_s=0)).start()
        try:
            path = Path(tmp) / "stack.yaml"
            path.write_text(stack_text(110, "benchreads", clusters=10))
            with cached_bytecode_env() as env:
                env.update(INFRA_EMULATOR_URL=server.url, INFRA_LOCAL_DIR=str(server.state_dir),
                           PYTHONPATH=str(ROOT))
                _apply(path, env)
            workspace = load_stack(path).stack.workspace
            target = EmulatorTarget(server.url, server.port, server.cert_path, server.token)
            wanted = {f"env{i:03d}": None for i in range(100)}
            configs = [(lat, threads, resume) for lat in (0.0, latency) for threads in (4, 32)
                       for resume in (True, False)]
            walls: dict = {c: [] for c in configs}
            opened: dict = {}
            saved = (provider_module.MAX_READ_CONCURRENCY, provider_module.BUSY_SHARE)
            try:
                for i in range(runs + 1):
                    for lat, threads, resume in configs:
                        server.faults = FaultConfig(latency_s=lat, provisioning_delay_s=0)
                        # the pool as large as `threads` allows (a busy share never reached)
                        provider_module.MAX_READ_CONCURRENCY, provider_module.BUSY_SHARE = threads, float("inf")
                        LoopbackTransport.resume_sessions = resume
                        clients = local_clients(workspace, target)
                        t = time.perf_counter()
                        found = provider_module.AzureProvider(clients).read_environments(wanted)
                        if i:
                            walls[(lat, threads, resume)].append(time.perf_counter() - t)
                        transport = clients.arm._client._pipeline._transport
                        opened[(lat, threads, resume)] = (transport.opened, transport.resumed)
                        clients.arm.close()
                        if sum(v is not None for v in found.values()) != len(wanted):
                            raise SystemExit("read_batch: an applied environment was not read")
            finally:
                provider_module.MAX_READ_CONCURRENCY, provider_module.BUSY_SHARE = saved
                LoopbackTransport.resume_sessions = True
        finally:
            server.stop()
    print(f"\nversion reads of 100 applied environments in-process (one list, then 100 GETs), median of {runs} runs")
    print(f"  {'latency':>8}  {'threads':>7}  {'resumption':>10}  {'wall s':>7}  {'connections (resumed)':>22}")
    for lat, threads, resume in configs:
        conns, resumed = opened[(lat, threads, resume)]
        print(f"  {lat * 1000:6.0f}ms  {threads:7}  {'on' if resume else 'off':>10}  "
              f"{statistics.median(walls[(lat, threads, resume)]):7.3f}  {conns:>14} ({resumed})")
    print(f"  ({_load()})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    with cached_bytecode_env() as env:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        cli_plan(args.runs, env)
        served_plans(args.runs, args.latency, env)
        local_110(args.runs, env)
    read_batch(args.runs, args.latency)


if __name__ == "__main__":
    main()
