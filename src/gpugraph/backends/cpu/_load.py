"""Kernels loaded for the CPU backend: ``load`` gives a Kernel's HostKernel for a CPU device, compiling its source
once per process for its options and template instance, and loading its library once per device.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..._errors import GpuGraphError, KernelCompileError
from ..._signature import is_device_function, kernel_names
from ._compile import HostModule, compile_module
from ._host_kernel import HostKernel

_lock = threading.Lock()
# By (source, options, template instance) and CPU device.
_modules: dict[tuple[tuple[str, tuple[str, ...], str], int], HostModule] = {}
_loaded: weakref.WeakKeyDictionary[Any, dict[int, HostKernel]] = weakref.WeakKeyDictionary()  # by Kernel, by device


def load(kernel: Any, device: int = 0) -> HostKernel:
    """``kernel`` compiled for the host and loaded for CPU device ``device``: once per Kernel and device; its source
    compiled once per process for its options and template instance, and once per machine with the disk cache;
    its library loaded once per device (device 0's first: it compiles, and the others load copies of its library)."""
    by_device = _loaded.get(kernel)
    loaded = None if by_device is None else by_device.get(device)
    if loaded is not None:
        return loaded
    if not kernel.from_source:
        raise GpuGraphError(_no_source(kernel))
    names = kernel_names(kernel.source, kernel.options)
    if is_device_function(kernel.source, kernel.name, kernel.options):  # (CUDA's module has no such kernel)
        raise KernelCompileError.no_kernel(kernel.name)
    if kernel.name not in names:  # a template's instance, or a name the reader cannot see
        names = [*names, kernel.name]
    key = (kernel.source, kernel.options, kernel.name if "<" in kernel.name else "")
    with _lock:
        module = _modules.get((key, 0))
    if module is None or kernel.name not in module.names:
        module = compile_module(kernel, names)  # (a failure leaves the source's module as it was)
        with _lock:
            _modules[key, 0] = module
    if device:
        with _lock:
            own = _modules.get((key, device))
        if own is None or own.names != module.names:  # (device 0's took a new name: load its library)
            own = HostModule(kernel, module.names, device)
            with _lock:
                _modules[key, device] = own
        module = own
    if module.refusal is not None:
        raise KernelCompileError(kernel.name, module.refusal)
    loaded = HostKernel(module, kernel)
    _loaded.setdefault(kernel, {})[device] = loaded
    return loaded


def _no_source(kernel: Any) -> str:
    """Why the CPU backend cannot run ``kernel``, which comes as compiled GPU code, and what to do instead."""
    if kernel.module is not None:
        what, how = f"GPU code of {kernel.module!r}", f"{kernel.module!r}.function({kernel.name!r}, ..., cpu=fn)"
    else:
        what, how = "another library's compiled GPU function", "Kernel.from_function(..., cpu=fn)"
    return (f"{kernel!r} is {what}, which the CPU backend cannot run: it runs kernels from their CUDA/HIP source "
            f"(gg.Kernel(source, name), compiled with the machine's C++ compiler) or as Python; give the kernel a "
            f"Python implementation, {how}, called as fn(launch, *args), or make it from its source")

