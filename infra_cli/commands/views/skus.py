"""Plain-text views for the terminal (no rich, no colour): the `infra skus` table."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from infra_cli.knowledge.skus import Sku

_COLUMNS = ("size", "GPUs", "GPU model", "vCPUs", "InfiniBand", "SR-IOV", "NCCL/IB", "healthy busbw GB/s", "notes")


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _infiniband(sku: Sku) -> str:
    ib = sku.infiniband
    if ib is None:
        return "-"
    total = f"{ib.total_gbps / 1000:g} Tb/s" if ib.total_gbps >= 1000 else f"{ib.total_gbps} Gb/s"
    per_link = f"{ib.links}x {ib.gbps_per_link}" if ib.links > 1 else f"{ib.gbps_per_link}"
    return f"{ib.generation} {per_link} = {total}" if ib.links > 1 else f"{ib.generation} {total}"


def _busbw(sku: Sku) -> str:
    hb = sku.healthy_busbw_gbs
    parts = []
    if hb.single_node is not None:
        parts.append(f"1 node >= {hb.single_node:g}")
    if hb.multi_node is not None:
        parts.append(f"multi ~{hb.multi_node:g}")
    return ", ".join(parts) or "-"


def _notes(sku: Sku, availability: str | None) -> str:
    notes = []
    if sku.retired:
        notes.append("RETIRED")
    if sku.rdma and not sku.sriov:
        notes.append("RDMA without SR-IOV: no IB in Azure ML")
    if sku.accelerator != "nvidia" and sku.gpus:
        notes.append(f"{sku.accelerator} (RCCL)")
    if sku.unconfirmed:
        notes.append("unconfirmed: " + ", ".join(sku.unconfirmed))
    if availability is not None:
        notes.append(availability)
    return "; ".join(notes)


def _row(sku: Sku, availability: str | None) -> tuple[str, ...]:
    return (
        sku.name,
        str(sku.gpus),
        sku.gpu_model or "-",
        str(sku.vcpus),
        _infiniband(sku),
        _yes_no(sku.sriov) if sku.rdma else "-",
        _yes_no(sku.nccl_over_ib) if sku.gpus else "n/a",
        _busbw(sku),
        _notes(sku, availability),
    )


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks stripped."""
    rows = [tuple(header), *(tuple(r) for r in rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def skus_table(rows: Iterable[Sku], available: Mapping[str, str] | None = None) -> str:
    """The `infra skus` table. `available` maps lower-case size names to an availability word (live check)."""
    skus = list(rows)
    if not skus:
        return "no sizes match"
    table = format_table(_COLUMNS, (
        _row(s, None if available is None else available.get(s.name.lower(), "not offered")) for s in skus))
    return table + "\nsource of each row: `infra skus --json` (validators/skus.yaml)"
