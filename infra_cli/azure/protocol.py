"""`Provider`: the one interface the engines read and write Azure through, answered as plain data.

azure/provider.py `AzureProvider` implements it over the SDKs (for Azure, and for the local emulator the command's
backend points it at); plan reads through it, apply writes through it, smoke records its verdicts through it.
Nothing here loads an SDK: the engines name the interface without paying for its implementation.

A resource is read, listed, written and deleted by its kind (`read(kind, name)`, `list(kind)`,
`write(kind, resource, ...)`, `delete(kind, name, ...)`; the kind is plan/kinds' name, "cluster", "environment"),
which the provider looks up in its table of Azure codecs (azure/kinds.py AZURE_KINDS). The methods named for one
kind are what only that kind has (an environment's batch of version reads, the tags put on one version) and the
per-kind operations the codecs are made of.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

# The names of the threads read_pool starts: the exit (commands/main.py run) does not wait for them either.
READ_THREADS = "infra-read"


@contextmanager
def read_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """Threads for reads made at once (through the provider, or of an image's layers). Ctrl-C, or any error,
    abandons the reads still in flight instead of waiting for them: a slow request held the exit for its whole
    timeout (25 s of a 30 s one after Ctrl-C). A read changes nothing, so nothing is left half-done."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=READ_THREADS)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class Written(Protocol):   # what a write takes: plan's Resource (frozen: read-only here), or anything with these
    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> dict: ...

    @property
    def tags(self) -> dict: ...


class RecordVersions(Protocol):
    """The numbered records infra keeps as an environment's versions (state/lock.py's lock, state/serial.py's
    serial): the latest one's (number, tags), and the registration of the next, refused (LockWriteRefused of
    azure/lock_store.py) where that number is taken."""

    def latest_record(self, name: str) -> tuple[int, dict[str, str]] | None: ...

    def register_record(self, name: str, version: int, tags: dict[str, str], *,
                        description: str = "infra stack lock (do not use in jobs)") -> None: ...


class JobRunner(Protocol):
    """Jobs on the workspace (smoke/run.py's): submit one, follow it, cancel it, fetch its outputs and logs."""

    def submit_job(self, spec: Any, code_dir: Path) -> str: ...

    def job_status(self, job_name: str) -> str: ...

    def cancel_job(self, job_name: str) -> None: ...

    def download_job(self, job_name: str, into: Path, **bounds: int) -> list[str]: ...

    def job_logs(self, job_name: str) -> dict[str, str]: ...


class Provider(RecordVersions, JobRunner, Protocol):
    # ---- reads: plain data; None where this identity may not read (403) ----------------------------------
    def smoke_record_name(self, stack: str, distribution: str) -> str: ...

    def list_computes(self) -> list[dict[str, Any]]: ...

    def read_compute(self, name: str) -> dict[str, Any] | None: ...

    def read_environments(self, wanted: dict[str, str | None]) -> dict[str, dict[str, Any] | None]: ...

    def resolve_environments(self, references: dict[str, str]) -> dict[str, str | None]: ...

    def environment_names(self, registry: str | None) -> list[str]: ...

    def environment_versions(self, reference: str) -> list[str]: ...

    def workspace_location(self) -> str | None: ...

    def read_workspace(self) -> dict[str, Any] | None: ...

    def sku_offers(self, location: str) -> dict[str, dict[str, Any]] | None: ...

    def usages(self, location: str) -> list[dict[str, Any]] | None: ...

    # ---- writes ---------------------------------------------------------------------------------------------
    def record_smoke(self, stack: str, distribution: str, tags: dict[str, str]) -> None: ...

    def put_cluster(self, resource: Written, secrets: Any, subnet: str | None, vnet_name: str | None) -> Any: ...

    def delete_cluster(self, name: str) -> None: ...

    def archive_environment(self, name: str, stack: str) -> list[str]: ...

    def forget_environment(self, name: str, stack: str) -> list[str]: ...

    def retire_records(self, stack: str, lock: str, lock_released: int | None) -> list[str]: ...

    def adopt_environment(self, name: str, version: str, tags: dict[str, str]) -> None: ...

    def create_environment_version(self, resource: Written, base_dir: Path, conda_file: str | dict | None,
                                   build_files: Callable[[Path], Path] | None) -> Any: ...

    # ---- by kind (azure/kinds.py): last in the class, as `list` here names the method, not the type ----------
    def read(self, kind: str, name: str, version: str | None = None) -> dict[str, Any] | None:
        """One resource of `kind` as plain values (a kind with versions: `version`, else the latest); None: none."""
        ...

    def list(self, kind: str) -> Any:
        """Every resource of `kind` in the workspace, as plain values."""
        ...

    def write(self, kind: str, resource: Written, **specifics: Any) -> Any:
        """Create `resource`, or change it in place; what the kind's write needs besides comes as keywords (a
        cluster: secrets, subnet, vnet_name; an environment: base_dir, conda_file, build_files)."""
        ...

    def delete(self, kind: str, name: str, **specifics: Any) -> Any:
        """Remove it as far as Azure lets the kind be removed (an environment's versions are archived: stack=)."""
        ...
