"""Reading a kernel's parameter list from its CUDA/HIP C++ source, so Python scalars pack as the C types."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_SCALAR_DTYPES = {
    "bool": np.bool_,
    "char": np.int8, "signed char": np.int8, "int8_t": np.int8,
    "unsigned char": np.uint8, "uint8_t": np.uint8,
    "short": np.int16, "short int": np.int16, "int16_t": np.int16,
    "unsigned short": np.uint16, "unsigned short int": np.uint16, "uint16_t": np.uint16,
    "int": np.int32, "signed": np.int32, "signed int": np.int32, "int32_t": np.int32,
    "unsigned": np.uint32, "unsigned int": np.uint32, "uint32_t": np.uint32,
    # LP64 (Linux): long is 64-bit.
    "long": np.int64, "long int": np.int64, "long long": np.int64, "long long int": np.int64,
    "int64_t": np.int64, "ptrdiff_t": np.int64, "ssize_t": np.int64,
    "unsigned long": np.uint64, "unsigned long int": np.uint64, "unsigned long long": np.uint64,
    "unsigned long long int": np.uint64, "uint64_t": np.uint64, "size_t": np.uint64,
    "float": np.float32, "double": np.float64, "__half": np.float16, "half": np.float16,
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
               "__grid_constant__", "register"}


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter as declared in C++.

    Attributes:
        name: The parameter's name ("" when unnamed).
        ctype: The declared type without qualifiers, e.g. ``"double*"`` or ``"size_t"``.
        pointer: Whether the parameter is a pointer (takes an Array).
        dtype: The scalar or pointed-to element type, or None when gpugraph cannot tell (templates,
            structs, void*).
    """

    name: str
    ctype: str
    pointer: bool
    dtype: np.dtype | None

    def __str__(self) -> str:
        return f"{self.ctype} {self.name}".strip()


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_param(text: str) -> KernelParam:
    pointer = "*" in text or "[" in text
    words = re.findall(r"[A-Za-z_][A-Za-z_0-9:]*", text.split("[")[0])
    words = [w for w in words if w not in _QUALIFIERS]
    # The last word is the name when there is more than one word and the text doesn't end in a '*'.
    name = ""
    if len(words) > 1 and not text.rstrip().endswith("*") and " ".join(words) not in _SCALAR_DTYPES:
        name = words.pop()
    base = " ".join(words)
    dtype = _SCALAR_DTYPES.get(base)
    return KernelParam(name, base + ("*" if pointer else ""), pointer,
                       np.dtype(dtype) if dtype is not None else None)


def parse_signature(source: str, name: str) -> tuple[KernelParam, ...] | None:
    """Return the parameters of ``__global__`` function ``name`` in ``source``, or None if not found."""
    text = _strip_comments(source)
    match = re.search(r"__global__\b[^;{}]*?\b" + re.escape(name) + r"\s*\(", text)
    if match is None:
        return None
    depth, start = 1, match.end()
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    else:
        return None
    inner = text[start:end].strip()
    if inner in ("", "void"):
        return ()
    return tuple(_parse_param(p) for p in _split_top_level(inner))
