"""What each built wheel holds, checked: its size (at most MAX_MIB), the license in its dist-info,
no source or generated C in it, and no debug info in its Linux kernels (an ELF ``.debug_info``
section). Prints one line per wheel; exits 1 naming the first wheel and the rule it broke.

    python tools/wheel_report.py wheelhouse/*.whl
"""

from __future__ import annotations

import struct
import sys
import zipfile
from pathlib import PurePosixPath

MAX_MIB = 4.0


def elf_sections(data: bytes) -> list[str]:
    """The section names of a 64-bit little-endian ELF file (empty for anything else)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_at = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = []
    for i in range(shnum):
        offset = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        end = data.index(b"\0", names_at + offset)
        names.append(data[names_at + offset : end].decode("ascii", "replace"))
    return names


def check(path: str) -> str:
    """One line about the wheel at ``path``; raises SystemExit naming what is wrong."""
    with zipfile.ZipFile(path) as wheel:
        infos = wheel.infolist()
        size = sum(i.compress_size for i in infos) / 2**20
        names = [PurePosixPath(i.filename) for i in infos]
        if not any(n.parent.name == "licenses" and n.name == "LICENSE" for n in names):
            raise SystemExit(f"{path}: no LICENSE in its dist-info/licenses")
        stray = [str(n) for n in names if n.suffix in (".c", ".pyx", ".o")]
        if stray:
            raise SystemExit(f"{path}: holds sources or objects: {', '.join(stray)}")
        kernels = [i for i in infos if i.filename.endswith((".so", ".pyd"))]
        if not kernels:
            raise SystemExit(f"{path}: holds no compiled kernel")
        for info in kernels:
            if ".debug_info" in elf_sections(wheel.read(info)):
                raise SystemExit(f"{path}: {info.filename} carries debug info (built with -g)")
        unpacked = sum(i.file_size for i in infos) / 2**20
    if size > MAX_MIB:
        raise SystemExit(f"{path}: {size:.1f} MiB, over the {MAX_MIB} MiB a wheel may take")
    name = PurePosixPath(path).name
    return f"{name}: {size:.2f} MiB ({unpacked:.1f} MiB unpacked), {len(kernels)} kernels, no debug info"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for argument in sys.argv[1:]:
        print(check(argument))
