"""Azure VM size names, read by Azure's naming convention.

`Standard_ND96isr_H100_v5` = family `ND`, 96 vCPUs, feature letters `isr`, accelerator `H100`, version 5.
The convention (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions): family letters,
vCPU count (with `-N` for constrained cores), lower-case feature letters (`r` = RDMA, `a` = AMD, `d` = local
disk, `s` = premium storage, `m` = more memory, `i` = isolated, ...), then `_ACCELERATOR` and `_vN`.
Family letters come before the number and feature letters after it, so a name in any case still parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SIZE = re.compile(
    r"^standard_(?P<family>[a-z]+)(?P<vcpus>[0-9]{1,4})(?:-(?P<active>[0-9]{1,4}))?(?P<features>[a-z]*)"
    r"(?:_(?P<rest>[a-z0-9]+(?:_[a-z0-9]+)*))?",
    re.IGNORECASE | re.ASCII)  # ASCII: no Kelvin-sign K or Arabic-Indic digits sneaking into a size
_VERSION = re.compile(r"v([0-9]{1,4})", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class SizeName:
    family: str                    # upper case: "ND", "NC", "HB", "DS"
    vcpus: int                     # the number in the name (the host's vCPUs for constrained sizes)
    active_vcpus: int | None       # `HB120-96rs_v3`: 96 of the 120 cores active
    features: str                  # lower case: "isr", "ads", ""
    accelerator: str | None        # upper case: "H100", "A100", "NDR_GB200", None
    version: int                   # 1 when the name has no `_vN`
    promo: bool = False

    @property
    def rdma(self) -> bool:
        """Azure's convention: `r` among the feature letters marks an RDMA (InfiniBand) capable size."""
        return "r" in self.features

    @property
    def gpu_or_hpc(self) -> bool:
        """N* families carry GPUs, H* families are HPC: the families the SKU catalog sets out to cover."""
        return self.family[:1] in ("N", "H")


def parse_size_name(name: str) -> SizeName | None:
    """The parts of an Azure VM size name, or None if it does not follow the convention."""
    m = _SIZE.fullmatch(name)
    if m is None:
        return None
    version, promo, accelerator = 1, False, []
    for part in m.group("rest").split("_") if m.group("rest") else []:
        v = _VERSION.fullmatch(part)
        if v:
            version = int(v.group(1))
        elif part.lower() == "promo":
            promo = True
        else:
            accelerator.append(part.upper())
    active = m.group("active")
    return SizeName(family=m.group("family").upper(), vcpus=int(m.group("vcpus")),
                    active_vcpus=int(active) if active else None, features=m.group("features").lower(),
                    accelerator="_".join(accelerator) or None, version=version, promo=promo)


def spelling_key(name: str) -> str:
    """A size name as people misspell it alike: lower case, without the `Standard_` prefix and without `_`
    (`Standard_ND96asr_v4`, `ND96asr_v4` and `Standard_ND96asrv4` are one key)."""
    lowered = name.strip().lower()
    return (lowered[len("standard_"):] if lowered.startswith("standard_") else lowered).replace("_", "")


def written_alike(name: str, known: list[str]) -> str | None:
    """The one name of `known` that `name` misspells: the same but for case, the `Standard_` prefix and `_`, or
    the same letters with two of them swapped (`DN96asr_v4` for `ND96asr_v4`); None when there is none or more
    than one."""
    if any(k.lower() == name.strip().lower() for k in known):   # a size of its own: nothing to suggest
        return None
    key = spelling_key(name)
    same = [k for k in known if spelling_key(k) == key]
    if len(same) == 1:
        return same[0]
    swapped = [k for k in known if _one_swap(key, spelling_key(k))]
    return swapped[0] if len(swapped) == 1 else None


def _one_swap(a: str, b: str) -> bool:
    """`a` is `b` with two neighbouring letters swapped."""
    if len(a) != len(b) or a == b:
        return False
    differ = [i for i in range(len(a)) if a[i] != b[i]]
    return len(differ) == 2 and differ[1] == differ[0] + 1 and a[differ[0]] == b[differ[1]] and \
        a[differ[1]] == b[differ[0]]
