"""Section sizes of an ELF object or shared library, read without binutils.

A board's code size must come from files built for other architectures too (an aarch64 or
Cortex-M object), which the host's ``size`` may not understand; the ELF header is simple
enough to read directly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHT_NOBITS = 8


class NotElf(ValueError):
    pass


@dataclass(frozen=True)
class SectionSizes:
    """Loaded bytes by kind, as ``size`` (Berkeley format) counts them."""

    text: int  # executable code
    rodata: int  # read-only data: constants, and the VM bytecode of a TVM library
    data: int  # initialised writable data
    bss: int  # zero-initialised writable data

    @property
    def flash(self) -> int:
        return self.text + self.rodata + self.data

    @property
    def ram(self) -> int:
        return self.data + self.bss

    def to_json(self) -> dict:
        return {"text": self.text, "rodata": self.rodata, "data": self.data, "bss": self.bss}


def section_sizes(path: str | Path) -> SectionSizes:
    raw = Path(path).read_bytes()
    if raw[:4] != b"\x7fELF":
        raise NotElf(f"{path} is not an ELF file")
    is64 = raw[4] == 2
    order = "<" if raw[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(order + "Q", raw, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", raw, 0x3A)
        header = order + "IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from(order + "I", raw, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", raw, 0x2E)
        header = order + "IIIIIIIIII"
    sizes = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for index in range(shnum):
        _, kind, flags, _, _, size, *_ = struct.unpack_from(header, raw, shoff + index * shentsize)
        if not flags & SHF_ALLOC:
            continue
        if flags & SHF_EXECINSTR:
            sizes["text"] += size
        elif kind == SHT_NOBITS:
            sizes["bss"] += size
        elif flags & SHF_WRITE:
            sizes["data"] += size
        else:
            sizes["rodata"] += size
    return SectionSizes(**sizes)
