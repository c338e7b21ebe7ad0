"""Driver symbol tables: the driver functions a GPU backend calls, under vendor-neutral names.

A backend calls ``drv.graph_add_kernel_node(...)`` rather than ``cuGraphAddKernelNode(...)``; its table says
which function of the vendor's bindings each name is. The CUDA backend's table is ``cuda/_symbols.py``
(cuda-bindings); a HIP backend is a second table of the same names over hip-python (``hipGraphAddKernelNode``,
``hipModuleLaunchKernel`` for ``launch_kernel``, ...), not a copy of the CUDA backend's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any


def symbol_table(vendor: ModuleType, names: Mapping[str, str]) -> Any:
    """An object whose attribute ``generic`` is the function ``names[generic]`` of the module ``vendor``.

    Each read looks the function up in ``vendor`` (a property: about 35 ns more than reading the module's
    attribute), so a function replaced there after the backend loaded (a test's stand-in, a counting
    wrapper) is the one called; the paths run per launch or per node bind theirs once, at import. The
    functions are the vendor's own: their ``__name__``, which error messages give, is the vendor's name.
    """
    def lookup(name: str) -> property:
        return property(lambda _table: getattr(vendor, name), doc=f"{vendor.__name__}.{name}")

    def describe(_table: object) -> str:
        return f"<driver symbol table: {len(names)} functions of {vendor.__name__}>"

    attributes: dict[str, Any] = {generic: lookup(name) for generic, name in names.items()}
    return type("SymbolTable", (), {"__slots__": (), "__repr__": describe, **attributes})()
