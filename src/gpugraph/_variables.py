"""Variables of a kernel's module (``__device__``, ``__constant__``, ``__managed__``) viewed as Arrays, so that copies
to and from them (HIP's and CUDA's ...ToSymbol/...FromSymbol calls) are ordinary copies, on streams and as nodes."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ._device_like import DeviceLike
from ._kernel import Kernel
from ._memory import Array, normalize_dtype
from ._placement import load_kernel
from ._signature import type_of
from .backends import get_backend

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def linkage_name(name: Any) -> str:
    """The name the compiled module gives variable ``name`` (C++'s, as NVRTC and the host compilers mangle it): a
    name at file scope as it is, one in namespaces (``ns::table``) mangled, ``_ZN2ns5tableE``."""
    if not isinstance(name, str):
        raise TypeError(f"symbol: name must be a str naming a __device__ or __constant__ variable, got {name!r}")
    parts = [part.strip() for part in name.strip().removeprefix("::").split("::")]
    if not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise ValueError(f"symbol: {name!r} is not a variable's name (an identifier, in namespaces or not, such as "
                         f"'table' or 'ns::table'; a template's variables are not supported)")
    if len(parts) == 1:
        return parts[0]
    return "_ZN" + "".join(f"{len(part)}{part}" for part in parts) + "E"


def _declaration(kernel: Kernel, name: str) -> tuple[np.dtype | None, tuple[int, ...] | None, str | None]:
    """The type and the array dimensions (literal ones) that ``kernel``'s source declares variable ``name`` with,
    each None where the source does not say it plainly; and the qualifier ("static" or "const") that keeps copies
    from reaching it on every backend, if any."""
    leaf = name.rsplit("::", 1)[-1].strip()
    source = _COMMENT.sub(" ", kernel.source)
    declarations = list(re.finditer(rf"(\bstatic\s+)?(?:__device__|__constant__|__managed__)\s+([^;{{}}()=]*?)"
                                    rf"\b{leaf}\s*((?:\[[^\]]*\]\s*)*)(?:=|;)", source))
    if not declarations:
        return None, None, None
    internal = None
    for found in declarations:
        tokens = found[2].replace("*", " * ").split()
        if found[1] or "static" in tokens:
            internal = "static"
        # (The variable itself const: "const int t[3]", "int* const p"; not "const int* p", a pointer to const.)
        elif "const" in (tokens[len(tokens) - tokens[::-1].index("*"):] if "*" in tokens else tokens):
            internal = internal or "const"
    if len(declarations) > 1:
        # (Variables of one name in several namespaces: which declaration is which, the reader does not follow
        # namespaces to tell. Static if any is: a copy might not reach it on every backend.)
        return None, None, internal
    found = declarations[0]
    words = [w for w in found[2].replace("*", " * ").split()
             if w not in ("static", "extern", "volatile", "const", "__device__", "__constant__", "__managed__")]
    dtype = None if "*" in words else type_of(words, kernel.source, kernel.options)
    sizes = re.findall(r"\[\s*([^\]]*?)\s*\]", found[3])
    dims = tuple(int(size) for size in sizes) if all(size.isdigit() for size in sizes) else None
    return dtype, dims, internal


def symbol(device: DeviceLike, kernel: object, name: Any, dtype: Any) -> Array:
    """The Array of ``kernel``'s module variable ``name`` on ``device`` (``Device.symbol``)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"symbol: kernel must be a gg.Kernel, whose module holds the variable, got "
                        f"{type(kernel).__name__}")
    if kernel.cpu is not None:
        # (The CPU backend runs such a kernel as Python, with no module to hold the source's variables: refused on
        # every backend, so that they agree.)
        raise ValueError(f"symbol: {kernel!r} has a Python implementation (cpu=), which the CPU backend runs instead "
                         f"of its source, so its module's variables exist on GPUs only; make the Kernel without cpu= "
                         f"to use them")
    linked = linkage_name(name)
    declared, dims, internal = _declaration(kernel, name)
    if internal:
        # (A host compiler may fold a static variable that its library never writes, and gives a const one internal
        # linkage, out of the library's table; CUDA's module exports both (measured on the H200). Refused on every
        # backend, so that they agree.)
        raise ValueError(f"symbol: {name!r} is declared {internal} in {kernel!r}'s source, so no copy may reach it "
                         f"on every backend (the CPU backend's compiler may fold it or keep it out of its library's "
                         f"table); declare it without {internal}")
    load_kernel(device, kernel)  # (first: a source that does not compile raises its error)
    alloc = get_backend(device.backend).kernel_variable(device.index, kernel, linked)
    if alloc is None:
        raise ValueError(f"symbol: the module of {kernel!r} on {device} has no __device__, __constant__ or __managed__ "
                         f"variable {name!r} (looked up as {linked!r})")
    if dtype is None:
        if declared is None:
            raise TypeError(f"symbol: gpugraph cannot read the type of {name!r} from {kernel!r}'s source (not a C "
                            f"number type, not declared plainly, or its name declared in several namespaces); give "
                            f"it: symbol(kernel, {name!r}, dtype=...)")
        dtype = declared
    else:
        dtype = normalize_dtype(dtype)
    if alloc.nbytes % dtype.itemsize:
        raise ValueError(f"symbol: {name!r} takes {alloc.nbytes} bytes, not a whole number of {dtype} elements")
    count = alloc.nbytes // dtype.itemsize
    if dtype == declared and dims is not None and math.prod(dims) == count:
        shape: tuple[int, ...] = dims  # (a scalar: shape (), as it is declared)
    else:
        shape = (count,)
    return Array(device, alloc.ptr, shape, dtype, alloc)
