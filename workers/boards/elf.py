"""Section sizes of an ELF object or shared library, read with pyelftools.

A board's code size must come from files built for other architectures too (an aarch64 or
Cortex-M object), which the host's ``size`` may not understand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile


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
    sizes = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    with open(path, "rb") as handle:
        try:
            elf = ELFFile(handle)
        except ELFError as exc:
            raise NotElf(f"{path} is not an ELF file: {exc}") from None
        for section in elf.iter_sections():
            flags = section["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC:
                continue
            if flags & SH_FLAGS.SHF_EXECINSTR:
                sizes["text"] += section["sh_size"]
            elif section["sh_type"] == "SHT_NOBITS":
                sizes["bss"] += section["sh_size"]
            elif flags & SH_FLAGS.SHF_WRITE:
                sizes["data"] += section["sh_size"]
            else:
                sizes["rodata"] += section["sh_size"]
    return SectionSizes(**sizes)
