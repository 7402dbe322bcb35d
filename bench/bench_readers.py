"""The readers of the files a stack names, at sizes an attacker picks (issue 31), in one run:

1. `infra validate` of a stack whose build context holds a 1 MB Dockerfile (RUN lines of `pip install` after
   `pip install`, with and without `&&`, backslash continuations, COPY flags: each shape was quadratic), and of one
   whose conda file is 1 MB (50,000 dependencies); the baseline, the same stack with a two-line Dockerfile and a
   two-line conda file, measured in the same run. Goal: each under 1 s.
2. `infra plan --local` peak memory (the process's maximum resident set) with a 20 GB sparse file in the build
   context, next to the same stack with an empty context: the context is hashed in 1 MiB chunks, so memory stays
   flat (it read each file whole: 2.1 GB for a 2 GB file).

Medians of repeated runs (wall and CPU time: the CPU figure is the steadier one on a loaded machine); each run a
new process with bytecode cached (bench/bytecode_cache.py), as for an installed package.

    python bench/bench_readers.py [--runs 5] [--sparse-gb 20] [--plan-runs 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode_cache import cached_bytecode_env  # bench/ is on sys.path: this script's folder

ROOT = Path(__file__).resolve().parent.parent
BASE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04"
STACK = """stack: readers
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-training, location: eastus}
clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  env: ENV
distributions:
  job: {cluster: gpu, environment: env, type: mpi, process_count_per_instance: 8, instance_count: 2}
"""
MB = 1_000_000


def big_dockerfile(size: int = MB) -> str:
    """Four quarters, one per shape that was quadratic."""
    quarter = size // 4
    shapes = ["RUN " + " ".join(["pip install torch"] * (quarter // 18)),
              "RUN " + " && ".join(["pip install torch"] * (quarter // 21)),
              "RUN true \\\n" + "  && pip install numpy \\\n" * (quarter // 25) + "  && true",
              "COPY " + "--chown=1:1 " * (quarter // 12) + '["conda.yml", "/tmp/"]']
    return f"FROM {BASE}\n" + "\n".join(shapes) + "\n"


def big_conda(size: int = MB) -> str:
    lines = ["name: big", "dependencies:", "  - python=3.10", "  - pip:"]
    i = 0
    while sum(map(len, lines)) + len(lines) < size - 40:
        lines.append(f"    - package-{i:06d}==1.0.{i % 100}")
        i += 1
    return "\n".join(lines) + "\n"


def run_measured(command: list[str], env: dict) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak resident KiB, exit status) of one process, from its own rusage (os.wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode


def medians(cases: dict[str, list[str]], runs: int, env: dict) -> dict[str, tuple[float, float, int, int]]:
    """Round-robin (run i of every case before run i + 1 of any), after one uncounted run of each."""
    for command in cases.values():
        run_measured(command, env)
    got: dict[str, list] = {k: [] for k in cases}
    for _ in range(runs):
        for label, command in cases.items():
            got[label].append(run_measured(command, env))
    return {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), max(r[2] for r in v),
                v[-1][3]) for k, v in got.items()}


def project(root: Path, dockerfile: str, conda: str) -> dict[str, Path]:
    """Two stacks in `root`: one building a context with `dockerfile`, one with an image and `conda`."""
    (root / "ctx").mkdir(parents=True)
    (root / "ctx" / "Dockerfile").write_text(dockerfile)
    (root / "conda.yml").write_text(conda)
    built, conda_stack = root / "built.yaml", root / "conda.yaml"
    built.write_text(STACK.replace("ENV", "{build: {path: ctx}}"))
    conda_stack.write_text(STACK.replace("ENV", f"{{image: {BASE}, conda_file: conda.yml}}"))
    return {"dockerfile": built, "conda": conda_stack}


def validate_section(runs: int, env: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        small = project(Path(tmp) / "small", f"FROM {BASE}\nRUN pip install torch\n",
                        "name: x\ndependencies: [python=3.10]\n")
        large = project(Path(tmp) / "large", big_dockerfile(), big_conda())
        sizes = {k: (Path(tmp) / "large" / ("ctx/Dockerfile" if k == "dockerfile" else "conda.yml")).stat().st_size
                 for k in large}
        infra = [sys.executable, "-m", "infra_cli", "validate"]
        cases = {"python -c pass": [sys.executable, "-c", "pass"]}
        for kind in ("dockerfile", "conda"):
            cases[f"validate, 2-line {kind}"] = infra + [str(small[kind])]
            cases[f"validate, {sizes[kind] / MB:.2f} MB {kind}"] = infra + [str(large[kind])]
        results = medians(cases, runs, env)
    print(f"infra validate, median of {runs} runs (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for label, (wall, cpu, rss, code) in results.items():
        goal = "  (goal < 1 s)" if " MB " in label else ""
        print(f"  {label:<34} {wall:6.3f} s wall  {cpu:6.3f} s CPU  {rss / 1024:6.1f} MiB peak  exit {code}{goal}")
    print()


def plan_section(sparse_gb: int, runs: int, env: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = {}
        for label, size in (("empty context", 0), (f"{sparse_gb} GB sparse file in the context", sparse_gb << 30)):
            folder = root / label.split()[0]
            (folder / "ctx").mkdir(parents=True)
            (folder / "ctx" / "Dockerfile").write_text(f"FROM {BASE}\n")
            if size:
                with open(folder / "ctx" / "data.bin", "wb") as fh:
                    fh.truncate(size)
            (folder / "stack.yaml").write_text(STACK.replace("ENV", "{build: {path: ctx}}"))
            cases[f"plan --local, {label}"] = [sys.executable, "-m", "infra_cli", "plan", str(folder / "stack.yaml"),
                                               "--local"]
        results = medians(cases, runs, {**env, "INFRA_LOCAL_DIR": str(root / "local")})
    print(f"infra plan --local, median of {runs} run(s), the 20 GB read and hashed each run "
          f"(load average {os.getloadavg()[0]:.1f})")
    for label, (wall, cpu, rss, code) in results.items():
        print(f"  {label:<44} {rss / 1024:7.1f} MiB peak  {wall:7.2f} s wall  {cpu:7.2f} s CPU  exit {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--plan-runs", type=int, default=1)
    parser.add_argument("--sparse-gb", type=int, default=20)
    args = parser.parse_args()
    with cached_bytecode_env() as env:
        validate_section(args.runs, env)
        plan_section(args.sparse_gb, args.plan_runs, env)


if __name__ == "__main__":
    main()
