"""check_image: read an image's layers top-down, judge the requirements, stop once every one is decided.

Why top-down: an upper layer can hide anything below it (whiteouts, opaque directories, replaced files),
never the reverse. So what the layers read so far show is final, and once every requirement's verdict
(and version) is final, and every hard link of the layers read resolves, the lower layers cannot change it
and are not read; where a requirement is not met, the check also reads on to the image's os-release, whose
distribution its fix names the packages for (image/fix.py). What is not read is not judged: a lower layer that is truncated or malformed is refused
only when the check reads it (`--json` lists the layers read; `early_exit=False` reads them all).

Layers are fetched (and verified) by fetch threads, a bounded distance ahead. Where the machine has more than
one spare core, walk threads decompress and index several layers at once (isal releases the GIL while it inflates,
so two layers inflate on two cores); the results are still taken top-down, one layer after the other, so the
verdict, the early exit and which refusal is reported are those of a walk in that order. Every walk shares
the check's bounds (the deadline, the paths one image may index) and stops when the check ends.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Iterator

from infra_cli.image.archive import DockerArchiveStore, OciLayoutStore
from infra_cli.image.blob import FETCHER_GRACE_S, PrefetchedBlob, decompressed_chunks, fetch_into
from infra_cli.image.errors import ImageReadError, Stopped
from infra_cli.image.evidence import ImageEnv, VariantFinding, build_matcher, judge_profile
from infra_cli.image.fix import OS_RELEASE_SOURCES, Distribution, fix_for, os_release_state, read_distribution
from infra_cli.image.layers import LayerIndex, Matcher, PathBudget, index_layer, layer_number
from infra_cli.image.limits import DEFAULT_TIMEOUT_S, NO_DEADLINE, Deadline, DeadlineExceeded
from infra_cli.image.manifest import ImageStore, Platform, ResolvedImage, parse_platform, resolve
from infra_cli.image.merged_filesystem import MergedView, State, check_hardlinks
from infra_cli.image.reference import ArchiveReference, LayoutReference, parse_reference, refuse_local_path
from infra_cli.image.registry import RegistryStore
from infra_cli.knowledge.requirements import Requirement, parse_requirement
from infra_cli.knowledge.image_evidence import Profile, families as distribution_families, profiles as evidence_profiles

DEFAULT_REQUIREMENTS = ("openmpi",)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"   # docker's default
DEFAULT_LIBRARY_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu",
                        "/usr/lib/x86_64-linux-gnu", "/usr/local/lib")
MAX_WORKERS = 3


@dataclass
class RequirementResult:
    requirement: str
    met: bool
    reason: str
    evidence: list[dict]      # the files and rules that found it (empty when nothing was found)
    variant: str | None = None
    version: str | None = None
    fix: dict | None = None   # what to do, when not met (image/fix.py)

    def to_json(self) -> dict:
        return {"requirement": self.requirement, "met": self.met, "reason": self.reason, "variant": self.variant,
                "version": self.version, "evidence": self.evidence, "fix": self.fix}


@dataclass
class CheckResult:
    reference: str
    digest: str | None
    media_type: str
    platform: str
    requirements: list[RequirementResult]
    findings: list[VariantFinding]
    env: dict[str, str]
    layers_total: int
    layers_read: int
    bytes_total: int
    bytes_read: int
    seconds: float
    stopped_early: bool
    layers: list[dict] = field(default_factory=list)   # the layers read, top first
    distribution: Distribution | None = None           # the image's os-release, where the layers read hold one

    @property
    def ok(self) -> bool:
        return all(r.met for r in self.requirements)

    def to_json(self) -> dict:
        return {"reference": self.reference, "digest": self.digest, "media_type": self.media_type,
                "platform": self.platform, "ok": self.ok,
                "requirements": [r.to_json() for r in self.requirements],
                "findings": [f.to_json() for f in self.findings if f.state is not State.ABSENT],
                "env": self.env, "layers_total": self.layers_total, "layers_read": self.layers_read,
                "bytes_total": self.bytes_total, "bytes_read": self.bytes_read,
                "seconds": round(self.seconds, 3), "stopped_early": self.stopped_early, "layers": self.layers,
                "distribution": self.distribution.to_json() if self.distribution else None}


def open_store(reference: str, *, insecure: bool = False, credential=None,
               deadline: Deadline = NO_DEADLINE) -> ImageStore:
    ref = parse_reference(reference)
    if isinstance(ref, ArchiveReference):
        return DockerArchiveStore(ref.path)
    if isinstance(ref, LayoutReference):
        return OciLayoutStore(ref.path, ref.tag)
    return RegistryStore(ref, insecure=insecure, credential=credential, deadline=deadline)


def image_env(image: ResolvedImage) -> ImageEnv:
    env = image.env
    path = tuple(p for p in env.get("PATH", DEFAULT_PATH).split(":") if p)
    libs = tuple(p.rstrip("/") for p in env.get("LD_LIBRARY_PATH", "").split(":") if p)
    return ImageEnv(path, libs + DEFAULT_LIBRARY_DIRS)


PREFETCH_CHUNKS = 16     # MiB queued ahead per layer being fetched: bounds memory and wasted reads


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as `taskset` or a container's cpuset sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:            # not Linux
        return os.cpu_count() or 1


def spare_cores() -> int:
    """The cores a check may keep busy: those it may run on, less what the machine's other work keeps busy
    (the 1-minute load average). On a busy machine a second walk would only take time from the first (and
    walks of layers below the verdict are work the early exit would have saved)."""
    usable = usable_cores()
    try:
        idle = (os.cpu_count() or usable) - os.getloadavg()[0]
    except OSError:                   # no load average to read
        return usable
    return max(1, min(usable, int(idle + 0.5)))


def _until_stopped(chunks: Iterator[bytes], stop: threading.Event) -> Iterator[bytes]:
    for chunk in chunks:
        if stop.is_set():
            raise Stopped()
        yield chunk


def _walk_layer(blob: PrefetchedBlob, position: int, rank: int, matcher: Matcher, deadline: Deadline,
                budget: PathBudget, stop: threading.Event) -> LayerIndex:
    try:
        kind, chunks = decompressed_chunks(blob)
        index = index_layer(_until_stopped(chunks, stop), position, blob.digest, matcher,
                            f"{blob.what} ({blob.digest})", deadline, budget, rank)
        blob.finish()        # trailing bytes count: the whole blob must match its digest
    except (DeadlineExceeded, Stopped):
        raise                  # out of time, or the check is over: the rest of the blob is not waited for
    except Exception as exc:   # a digest mismatch explains a corrupt or truncated stream best
        try:
            blob.finish()
        except ImageReadError as bad:
            raise bad from None
        except Exception:
            pass
        if isinstance(exc, ImageReadError):
            raise
        raise ImageReadError(f"{blob.what} ({blob.digest}) could not be read: {exc}",
                             "the layer is corrupt or the connection dropped; retry, or push/save the image again") from None
    index.compression, index.compressed_bytes = kind, blob.bytes_read
    return index


def _walked(future: Future, deadline: Deadline, what: str) -> LayerIndex:
    """A walk thread's index (or its error). A walk keeps to the deadline itself; this wait does too, in case."""
    while True:
        try:
            return future.result(timeout=deadline.wait_s(1.0))
        except FutureTimeout:
            left = deadline.remaining()
            if left is not None and left < -2 * FETCHER_GRACE_S:
                raise deadline.error(f"waiting for {what} to be indexed") from None


def _requirement_result(req: Requirement, findings: list[VariantFinding]) -> RequirementResult:
    present = [f for f in findings if f.state is State.FOUND]
    for f in present:
        if req.met_by(f.version):
            source = f" (version from {f.version_source['source']})" if f.version_source else ""
            return RequirementResult(str(req), True, f"{f.variant}{' ' + f.version if f.version else ''} found{source}",
                                     [e for r in f.rules for e in r.evidence], f.variant, f.version)
    if present:
        f = present[0]
        why = "version unknown" if f.version is None else f"version {f.version} does not satisfy {req.op}{req.version}"
        return RequirementResult(str(req), False, f"{f.variant} found but {why}",
                                 [e for r in f.rules for e in r.evidence], f.variant, f.version)
    missing = sorted({r.rule for f in findings for r in f.rules if r.state is not State.FOUND})
    return RequirementResult(str(req), False, "not found: " + "; ".join(missing), [])


def _met(findings: list[VariantFinding], req: Requirement) -> bool:
    return any(f.state is State.FOUND and f.decided and req.met_by(f.version) for f in findings)


def _decided(findings: list[VariantFinding], req: Requirement) -> bool:
    return _met(findings, req) or all(f.decided for f in findings)


def _verdict_final(view: MergedView, requirements: list[Requirement], profiles: dict[str, Profile],
                   env: ImageEnv) -> bool:
    """Every requirement decided, and where one is not met, the image's os-release too (its fix names the
    distribution's packages): the lower layers cannot change what the check reports."""
    findings = [(judge_profile(view, profiles[r.name], env), r) for r in requirements]
    if not all(_decided(f, r) for f, r in findings):
        return False
    return all(_met(f, r) for f, r in findings) or os_release_state(view) is not State.UNKNOWN


def _resolve(store: ImageStore, platform: Platform | None) -> ResolvedImage:
    try:
        return resolve(store, platform)
    except ImageReadError as exc:    # say which image, where the reader could not (a manifest, a config)
        store.close()
        raise exc.located(store.description) from None


def check_store(store: ImageStore, requirements: list[Requirement], *, platform: Platform | None = None,
                profiles: dict[str, Profile] | None = None, early_exit: bool = True,
                deadline: Deadline = NO_DEADLINE, workers: int | None = None) -> CheckResult:
    """`platform` None: linux/amd64 out of an index, a single-platform image whatever its config says.
    `deadline` bounds the walk (a registry store holds the same one for its requests). `workers`: how many
    layers are decompressed and indexed at once (default: one per spare core, at most MAX_WORKERS)."""
    started = time.perf_counter()
    profiles = profiles or evidence_profiles()
    image = _resolve(store, platform)
    env = image_env(image)
    wanted = {r.name for r in requirements}
    extra = [name for r in requirements for name in profiles[r.name].see_also if name not in wanted]
    judged = [profiles[n] for n in dict.fromkeys([*wanted, *extra])]
    matcher = build_matcher(judged, OS_RELEASE_SOURCES)

    layers = list(image.layers)
    total = len(layers)
    stop = threading.Event()
    read: list[LayerIndex] = []
    stopped_early = False
    view = MergedView(read, complete=(total == 0))
    walkers = min(workers or spare_cores(), MAX_WORKERS, total)
    budget = PathBudget(total)     # paths indexed, over all layers: memory stays bounded
    # Fetch threads download and verify layers top-down, each at most PREFETCH_CHUNKS ahead of its walk; walk
    # threads (or this one, on one core) decompress and index them; this thread takes the indexes top-down.
    fetches: list[Future] = []
    walks: list[Future] = []
    pool = ThreadPoolExecutor(max_workers=min(MAX_WORKERS, total or 1), thread_name_prefix="fetch")
    walk_pool = ThreadPoolExecutor(max_workers=walkers, thread_name_prefix="walk") if walkers > 1 else None
    try:
        blobs = []
        for pos in reversed(range(total)):
            desc, what = layers[pos], f"layer {layer_number(pos)} of {total}"
            q: queue.Queue = queue.Queue(maxsize=PREFETCH_CHUNKS)
            fetches.append(pool.submit(fetch_into, lambda d=desc: store.open_blob(d), desc.digest, desc.size,
                                       what, q, stop))
            blobs.append((pos, PrefetchedBlob(q, desc.digest, what, deadline, stop)))
        if walk_pool is not None:
            walks = [walk_pool.submit(_walk_layer, blob, pos, rank, matcher, deadline, budget, stop)
                     for rank, (pos, blob) in enumerate(blobs)]
        for rank, (pos, blob) in enumerate(blobs):
            read.append(_walked(walks[rank], deadline, blob.what) if walks else
                        _walk_layer(blob, pos, rank, matcher, deadline, budget, stop))
            view = MergedView(read, complete=(rank == total - 1))
            links_pending = check_hardlinks(read, view.complete, total)
            if early_exit and not view.complete and not links_pending and _verdict_final(view, requirements,
                                                                                          profiles, env):
                stopped_early = True
                break
    except ImageReadError as exc:
        raise exc.located(store.description) from None
    finally:
        stop.set()             # every fetch and walk thread ends at its next chunk
        budget.cancel()
        for future in fetches + walks:
            future.cancel()
        store.close()          # first: a fetch thread blocked on a socket is woken by it
        if walk_pool is not None:
            walk_pool.shutdown(wait=True)
        pool.shutdown(wait=True)
    # what the fetchers downloaded, including read-ahead of layers the verdict did not need
    bytes_read = sum(f.result() for f in fetches if f.done() and not f.cancelled())

    findings = {name: judge_profile(view, profiles[name], env) for name in dict.fromkeys([*wanted, *extra])}
    results = [_requirement_result(r, findings[r.name]) for r in requirements]
    families = distribution_families()
    distribution = read_distribution(view, families)
    for req, result in zip(requirements, results):
        if not result.met:
            result.fix = fix_for(req, profiles[req.name].fix, distribution, families)
    return CheckResult(
        reference=store.description, digest=image.digest, media_type=image.media_type, platform=image.platform,
        requirements=results,
        findings=[f for fs in findings.values() for f in fs], env={k: v for k, v in image.env.items()
                                                                   if k in ("PATH", "LD_LIBRARY_PATH")},
        layers_total=total, layers_read=len(read), bytes_total=sum(max(d.size, 0) for d in layers),
        bytes_read=bytes_read, seconds=time.perf_counter() - started, stopped_early=stopped_early,
        layers=[{"layer": i.number, "digest": i.digest, "compression": i.compression,
                 "bytes": i.compressed_bytes, "entries": i.entries} for i in read],
        distribution=distribution)


def check_image(reference: str, requirements: list[Requirement] | list[str] | None = None, *,
                platform: str | None = None, insecure: bool = False, credential=None,
                early_exit: bool = True, timeout: float | None = DEFAULT_TIMEOUT_S,
                workers: int | None = None, local_paths: bool = False) -> CheckResult:
    """Check that the image at `reference` meets `requirements` (specs or strings, default openmpi).

    `platform` (OS/ARCH[/VARIANT]) picks from a multi-arch index (default linux/amd64); given, it must also
    be what a single-platform image's config says.
    Raises ImageReadError (a DiagnosticError) when the image cannot be read, is not of `platform`, or a blob
    does not verify, or `platform` is malformed, or the check takes longer than `timeout` seconds (None: no
    bound) or overruns any of the reader's bounds (limits.py); and SpecError for a malformed requirement.
    `local_paths` (what a person typed: `infra image check`): a name with no registry that is a local OCI layout or
    file is refused with the `oci:`/`docker-archive:` it lacks (reference.refuse_local_path), before any request.
    """
    reqs = [parse_requirement(r) if isinstance(r, str) else r for r in (requirements or DEFAULT_REQUIREMENTS)]
    wanted = parse_platform(platform) if platform is not None else None   # refused before the image is opened
    if local_paths:
        refuse_local_path(reference)
    deadline = Deadline(timeout)
    store = open_store(reference, insecure=insecure, credential=credential, deadline=deadline)
    return check_store(store, reqs, platform=wanted, early_exit=early_exit, deadline=deadline, workers=workers)
