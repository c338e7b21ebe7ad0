"""The symbol table of a compiled kernel library (ELF, 64-bit little-endian: Linux on x86-64 and AArch64), read
for the sizes of the kernels' ``__shared__`` variables, which the CPU backend must refuse beyond CUDA's limit as
the GPU compiler does, and for where the module's ``__device__`` variables are."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

OBJECT, FUNC, TLS = 1, 2, 6  # symbol types (STT_OBJECT, STT_FUNC, STT_TLS)
_SYMTAB = 2  # section type SHT_SYMTAB


class Symbol(NamedTuple):
    name: str
    kind: int
    local: bool
    value: int
    size: int


def symbols(path: Path) -> list[Symbol] | None:
    """The symbols of the library at ``path`` (its full table, local ones included), or None where it is not a
    64-bit little-endian ELF file or has no symbol table (stripped)."""
    data = path.read_bytes()
    if data[:6] != b"\x7fELF\x02\x01":
        return None
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + k * entry_size) for k in range(count)]
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != _SYMTAB:
            continue
        names_at = sections[link][4]
        out = []
        for name_at, info, _, _, value, length in struct.iter_unpack("<IBBHQQ", data[offset:offset + size]):
            end = data.index(b"\0", names_at + name_at)
            name = data[names_at + name_at:end].decode(errors="replace")
            out.append(Symbol(name, info & 0xF, info >> 4 == 0, value, length))
        return out
    return None


def static_shared_size(table: list[Symbol], function: int) -> int:
    """The bytes of the ``__shared__`` variables of the function at address ``function`` (the library's own): its
    local static thread_local objects and its lambdas' (whose names the C++ ABI makes from its own), and the
    thread_local objects at file scope that are not gpugraph's (its header's are local or in namespace gg)."""
    name = next((s.name for s in table if s.kind == FUNC and s.value == function and s.name), None)
    if name is None:
        return 0
    encoding = name[2:] if name.startswith("_Z") else f"{len(name)}{name}"  # (extern "C": the plain name)
    own = (f"_ZZ{encoding}E", f"_ZZZ{encoding}E")
    return sum(s.size for s in table if s.kind == TLS and (
        s.name.startswith(own) or (not s.local and not s.name.startswith(("_ZZ", "_ZN2gg", "_ZGV", "_ZTH", "_ZTW")))))
