"""Real images for the image checker's tests, built with no daemon.

Files come from Debian's own packages (apt-get download + dpkg-deb -x, cached across runs), layers are
tars written here (so whiteouts, opaque directories and link chains are exact), images are assembled by
umoci, converted by skopeo (docker schema 2, zstd, docker-archive, multi-arch index) and pushed to a real
`docker-registry` serving on 127.0.0.1.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from system_tools import IMAGE_TOOLS, require

OPENMPI_DEBS = ["openmpi-bin", "libopenmpi3", "openmpi-common", "libibverbs1", "ibverbs-providers", "libucx0"]
MPICH_DEBS = ["mpich", "libmpich12"]
CACHE = Path(os.environ.get("INFRA_TEST_CACHE") or Path.home() / ".cache" / "infra-tests")
OPENMPI_ALTERNATIVES = {"/usr/bin/mpirun": "/usr/bin/mpirun.openmpi", "/usr/bin/mpiexec": "/usr/bin/mpiexec.openmpi"}
MPICH_ALTERNATIVES = {"/usr/bin/mpirun": "/usr/bin/mpirun.mpich", "/usr/bin/mpiexec": "/usr/bin/mpiexec.mpich"}


def run(*cmd: str, cwd: Path | None = None) -> str:
    require(cmd[0])   # every Debian program the images are made with: a skip naming its package where it is absent
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def download_debs(packages: list[str]) -> list[Path]:
    """The packages' .deb files, downloaded once into the cache (under a lock: pytest-xdist's workers share it)."""
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    with open(debs / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [p for p in packages if not list(debs.glob(f"{p}_*.deb"))]
        if missing:
            run("apt-get", "download", *missing, cwd=debs)
    return [sorted(debs.glob(f"{p}_*.deb"))[-1] for p in packages]


# ---- layers ---------------------------------------------------------------------------------------------

@dataclass
class Layer:
    """A layer under construction: entries in tar order."""
    entries: list[tuple]

    def __init__(self):
        self.entries = []

    def file(self, path: str, data: bytes | str = b"", mode: int = 0o644) -> "Layer":
        self.entries.append(("file", path, data.encode() if isinstance(data, str) else data, mode))
        return self

    def symlink(self, path: str, target: str) -> "Layer":
        self.entries.append(("symlink", path, target))
        return self

    def hardlink(self, path: str, target: str) -> "Layer":
        self.entries.append(("hardlink", path, target))
        return self

    def dir(self, path: str) -> "Layer":
        self.entries.append(("dir", path))
        return self

    def whiteout(self, path: str) -> "Layer":
        parent, _, name = path.rstrip("/").rpartition("/")
        return self.file(f"{parent}/.wh.{name}")

    def opaque(self, directory: str) -> "Layer":
        return self.file(f"{directory.rstrip('/')}/.wh..wh..opq")

    def tree(self, root: Path) -> "Layer":
        """Every file under root (as extracted from .debs), dirs first, links kept as links."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = "/" + os.path.relpath(dirpath, root).lstrip(".")
            if rel != "/":
                self.dir(rel)
            for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                full = os.path.join(dirpath, name)
                path = f"{rel.rstrip('/')}/{name}"
                if os.path.islink(full):
                    self.symlink(path, os.readlink(full))
                else:
                    self.file(path, Path(full).read_bytes(), os.stat(full).st_mode & 0o7777)
        return self

    def write(self, dest: Path) -> Path:
        with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
            for entry in self.entries:
                kind, path = entry[0], entry[1].lstrip("/")
                info = tarfile.TarInfo(path)
                info.mtime = 1700000000
                if kind == "file":
                    info.size, info.mode = len(entry[2]), entry[3]
                    tar.addfile(info, io.BytesIO(entry[2]))
                    continue
                if kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                elif kind == "symlink":
                    info.type, info.linkname = tarfile.SYMTYPE, entry[2]
                elif kind == "hardlink":
                    info.type, info.linkname = tarfile.LNKTYPE, entry[2].lstrip("/")
                tar.addfile(info)
        return dest


def dpkg_status(debs: list[Path], base: str = "") -> str:
    """/var/lib/dpkg/status as apt would leave it after installing `debs`."""
    stanzas = [base.strip()] if base.strip() else []
    for deb in debs:
        fields = run("dpkg-deb", "-f", str(deb)).strip().splitlines()
        package = next(line for line in fields if line.startswith("Package:"))
        rest = [line for line in fields if not line.startswith("Package:")]
        stanzas.append("\n".join([package, "Status: install ok installed", *rest]))
    return "\n\n".join(stanzas) + "\n"


BASE_STATUS = "Package: base-files\nStatus: install ok installed\nVersion: 12.4+deb12u5\n"


def base_layer() -> Layer:
    """A tiny Debian-like root: usrmerge links, an os-release, dpkg status without any MPI."""
    return (Layer().dir("/usr").dir("/usr/bin").dir("/usr/lib").dir("/etc").dir("/var/lib/dpkg")
            .symlink("/bin", "usr/bin").symlink("/lib", "usr/lib")
            .file("/etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
            .file("/usr/bin/sh", b"\x7fELF-not-really", 0o755)
            .file("/var/lib/dpkg/status", BASE_STATUS))


def package_layer(packages: list[str], alternatives: dict[str, str], workdir: Path) -> Layer:
    """The layer `apt-get install PACKAGES` would make: the packages' files, alternatives links, dpkg status."""
    debs = download_debs(packages)
    root = workdir / ("root-" + "-".join(packages))
    if not root.exists():
        for deb in debs:
            run("dpkg-deb", "-x", str(deb), str(root))
    layer = Layer().tree(root)
    for link, target in alternatives.items():   # what update-alternatives does in postinst
        name = link.rsplit("/", 1)[1]
        layer.symlink(link, f"/etc/alternatives/{name}").symlink(f"/etc/alternatives/{name}", target)
    return layer.file("/var/lib/dpkg/status", dpkg_status(debs, BASE_STATUS))


# ---- images ---------------------------------------------------------------------------------------------

def build_oci(layout: Path, tag: str, layers: list[Layer | Path], *, env: dict[str, str] | None = None,
              arch: str = "amd64") -> str:
    """An OCI image built by umoci from `layers` (gzip); returns its `oci:DIR:TAG` reference."""
    if not (layout / "index.json").exists():
        run("umoci", "init", "--layout", str(layout))
    image = f"{layout}:{tag}"
    run("umoci", "new", "--image", image)
    config = ["--architecture", arch, "--os", "linux"]
    for key, value in (env or {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}).items():
        config += ["--config.env", f"{key}={value}"]
    run("umoci", "config", "--image", image, *config)
    for i, layer in enumerate(layers):   # a Layer is written here; a Path is a tar written by the caller
        tar = layer.write(layout.parent / f"{layout.name}-{tag}-{i}.tar") if isinstance(layer, Layer) else layer
        run("umoci", "raw", "add-layer", "--image", image, str(tar))
        if isinstance(layer, Layer):
            tar.unlink()
    return f"oci:{image}"


def add_index(layout: Path, tag: str, members: list[str]) -> str:
    """An OCI image index over the tagged manifests `members`, stored in the layout under `tag`."""
    index = json.loads((layout / "index.json").read_text())
    by_tag = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in index["manifests"]}
    entries = []
    for member in members:
        desc = dict(by_tag[member])
        config = json.loads((layout / "blobs/sha256" / json.loads(
            (layout / "blobs/sha256" / desc["digest"].split(":")[1]).read_text())["config"]["digest"].split(":")[1]).read_text())
        desc.pop("annotations", None)
        desc["platform"] = {"os": config["os"], "architecture": config["architecture"]}
        entries.append(desc)
    blob = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                       "manifests": entries}).encode()
    digest = hashlib.sha256(blob).hexdigest()
    (layout / "blobs/sha256" / digest).write_bytes(blob)
    index["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json", "digest": f"sha256:{digest}",
                               "size": len(blob), "annotations": {"org.opencontainers.image.ref.name": tag}})
    (layout / "index.json").write_text(json.dumps(index))
    return f"oci:{layout}:{tag}"


def write_blob(layout: Path, content: bytes | dict | list) -> tuple[str, int]:
    """Store `content` (JSON unless bytes) as a blob of the layout, whatever its shape; returns (digest, size)."""
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs/sha256" / digest).write_bytes(data)
    return f"sha256:{digest}", len(data)


def point_tag(layout: Path, tag: str, document: bytes | dict | list,
              media_type: str = "application/vnd.oci.image.manifest.v1+json") -> str:
    """Store `document` as the manifest (or index) that `tag` names in index.json, as a hand-edited layout
    would; the digest matches, so only the document's shape is wrong. Returns `oci:DIR:TAG`."""
    digest, size = write_blob(layout, document)
    index = json.loads((layout / "index.json").read_text())
    index["manifests"] = [m for m in index["manifests"]
                          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
    index["manifests"].append({"mediaType": media_type, "digest": digest, "size": size,
                               "annotations": {"org.opencontainers.image.ref.name": tag}})
    (layout / "index.json").write_text(json.dumps(index))
    return f"oci:{layout}:{tag}"


def skopeo_copy(src: str, dest: str, *extra: str) -> None:
    run("skopeo", "copy", "--quiet", "--insecure-policy", "--dest-tls-verify=false", *extra, src, dest)


# ---- the registry ---------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """Debian's docker-registry (distribution 2.8) on 127.0.0.1, storage in a temp dir, no auth."""

    def __init__(self, root: Path):
        self.root, self.port = root, free_port()
        self.host = f"127.0.0.1:{self.port}"
        config = root / "config.yml"
        root.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "version: 0.1\nlog: {level: error}\n"
            f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
            f"http: {{addr: '{self.host}'}}\n")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"docker-registry did not start: {self.proc.stderr.read().decode()[-1000:]}")
                time.sleep(0.05)

    def push(self, src: str, name: str, *extra: str) -> str:
        ref = f"{self.host}/{name}"
        skopeo_copy(src, f"docker://{ref}", *extra)
        return ref

    def blob_file(self, digest: str) -> Path:
        hexpart = digest.split(":")[1]
        return self.root / "data/docker/registry/v2/blobs/sha256" / hexpart[:2] / hexpart / "data"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@dataclass
class Images:
    """The session's test images: OCI layout references and where the registry holds them."""
    layout: Path
    registry: Registry
    refs: dict[str, str]           # name -> oci:DIR:TAG


def manifest_of(layout: Path, tag: str) -> dict:
    index = json.loads((layout / "index.json").read_text())
    desc = next(m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
    return json.loads((layout / "blobs/sha256" / desc["digest"].split(":")[1]).read_text())


@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> Registry:
    require(*IMAGE_TOOLS)   # every test on the registry or its images skips naming the packages (fails in CI)
    reg = Registry(tmp_path_factory.mktemp("registry"))
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def images(tmp_path_factory, registry) -> Images:
    work = tmp_path_factory.mktemp("images")
    layout = work / "layout"
    openmpi = package_layer(OPENMPI_DEBS, OPENMPI_ALTERNATIVES, work)
    refs = {
        "openmpi": build_oci(layout, "openmpi", [base_layer(), openmpi, Layer().file("/app/train.py", "print(1)\n")]),
        "mpich": build_oci(layout, "mpich", [base_layer(), package_layer(MPICH_DEBS, MPICH_ALTERNATIVES, work)]),
        "whiteout": build_oci(layout, "whiteout", [base_layer(), openmpi, Layer()
                              .whiteout("/usr/bin/orterun").whiteout("/usr/lib/x86_64-linux-gnu/openmpi")
                              .whiteout("/usr/lib/x86_64-linux-gnu/libopen-pal.so.40")
                              .whiteout("/usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.2")
                              .file("/var/lib/dpkg/status", BASE_STATUS)]),
        "opaque": build_oci(layout, "opaque", [base_layer(), openmpi, Layer()
                            .opaque("/usr/lib/x86_64-linux-gnu").file("/usr/lib/x86_64-linux-gnu/libz.so.1", b"z")]),
        "arm64": build_oci(layout, "arm64", [base_layer()], arch="arm64"),
    }
    refs["multi"] = add_index(layout, "multi", ["openmpi", "arm64"])
    for name in ("openmpi", "mpich", "whiteout", "opaque"):
        registry.push(refs[name], f"test/{name}:oci", "--format", "oci")
    registry.push(refs["openmpi"], "test/openmpi:v2s2", "--format", "v2s2")
    registry.push(refs["multi"], "test/multi:latest", "--all")
    zstd_layout = work / "zstd"
    skopeo_copy(refs["openmpi"], f"oci:{zstd_layout}:zstd", "--dest-compress-format", "zstd", "--dest-compress")
    refs["zstd"] = f"oci:{zstd_layout}:zstd"
    registry.push(refs["zstd"], "test/openmpi:zstd", "--format", "oci")
    return Images(layout, registry, refs)
