"""Compiling kernel source with NVRTC for a device, once per (device, source, options)."""

from __future__ import annotations

import functools
import threading
from typing import Any

from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

from ..._errors import BackendError, KernelCompileError
from ..._signature import kernel_names
from ._driver import call
from ._symbols import drv


def _nvrtc(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise BackendError("cuda", fn.__name__, repr(result[0]))
    return result[1] if len(result) == 2 else None


@functools.lru_cache(maxsize=1)
def toolkit_includes() -> tuple[str, ...]:
    """The CUDA toolkit's include folders (the cuda-toolkit wheels' or $CUDA_HOME's), which hold the headers
    kernels include beyond NVRTC's built-in ones: cudart's (cuda_fp16.h, cuda_bf16.h, cooperative_groups.h, ...)
    and, since CUDA 13 keeps them apart, CCCL's (nv/target, which cooperative_groups.h includes; cuda/std/...);
    those found, in that order."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:  # (cuda-bindings 13 depends on cuda-pathfinder; an older install may lack it)
        return ()
    found = [find_nvidia_header_directory("cudart")]
    try:
        found.append(find_nvidia_header_directory("cccl"))
    except RuntimeError as exc:  # a pathfinder older than its CCCL lookup says "UNKNOWN libname='cccl'"
        if not str(exc).startswith("UNKNOWN"):
            raise
    return tuple(folder for folder in found if folder is not None)


# Where NVRTC cannot find CCCL's headers, what a compile error adds (cooperative_groups.h includes nv/target).
CCCL_MISSING = ("; CCCL's headers (nv/target, cuda/std/...) were not found: install them with "
                "`pip install \"cuda-toolkit[cccl]==13.*\"`")


class ModuleCache:
    """Loaded modules by (device, source, options, template instance); each module holds every kernel of its
    source that is not a template, and the instance it was compiled for: where some name the reader finds is no
    kernel NVRTC can name (one under an ``#ifdef`` the reader does not evaluate), every other one."""

    def __init__(self) -> None:
        self._modules: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def function(self, index: int, device: Any, kernel: Any) -> Any:
        """The CUfunction of ``kernel`` on device ``index``, compiling its source on first use."""
        # (A template's instance is compiled into a module of its own: the source's module lacks it.)
        key: tuple = (index, kernel.source, kernel.options, kernel.name if "<" in kernel.name else None)
        names = kernel_names(kernel.source, kernel.options)  # as the signature reader sees them: no comments
        if "<" in kernel.name:  # a name expression: NVRTC instantiates the template it names
            names.append(kernel.name)
        with self._lock:
            if key not in self._modules or (kernel.name in names and kernel.name not in self._modules[key][1]):
                self._modules[key] = self._compile_names(device, kernel, names)
            module, lowered = self._modules[key]
        name = lowered.get(kernel.name, kernel.name.encode())  # not found by name: extern "C" made by a macro
        err, function = drv.module_get_function(module, name)
        if err and kernel.name not in lowered:
            # A name the reader does not list (one `using namespace` makes visible): NVRTC may name it yet, in a
            # module of its own (the CPU backend's entry point takes such a name too).
            key = (*key, kernel.name)
            with self._lock:
                if key not in self._modules:
                    try:
                        self._modules[key] = self._compile(device, kernel, [kernel.name])
                    except KernelCompileError:
                        self._modules[key] = None
                found = self._modules[key]
            if found is not None:
                err, function = drv.module_get_function(found[0], found[1][kernel.name])
        if err:
            raise KernelCompileError.no_kernel(kernel.name)
        return function

    def _compile_names(self, device: Any, kernel: Any, names: list[str]) -> tuple[Any, dict[str, bytes]]:
        """The module of ``kernel``'s source with the name expressions ``names``; where NVRTC cannot name some of
        them, the module of the others (found by compiling each alone, once per process), so that the source's
        kernels share one module and its ``__device__`` variables."""
        try:
            return self._compile(device, kernel, names)
        except KernelCompileError:
            if len(names) <= 1:
                raise
            self._unload(self._compile(device, kernel, []))  # (the source itself does not compile: its error)
            good = [name for name in names if self._compiles(device, kernel, name)]
            if kernel.name in names and kernel.name not in good:
                return self._compile(device, kernel, [kernel.name])  # (its own error)
            return self._compile(device, kernel, good)

    def _compiles(self, device: Any, kernel: Any, name: str) -> bool:
        try:
            self._unload(self._compile(device, kernel, [name]))
        except KernelCompileError:
            return False
        return True

    @staticmethod
    def _unload(compiled: tuple[Any, dict[str, bytes]]) -> None:
        call(cu.cuModuleUnload, compiled[0])

    @staticmethod
    def _compile(device: Any, kernel: Any, names: list[str]) -> tuple[Any, dict[str, bytes]]:
        major = call(drv.device_get_attribute, cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                     device)
        minor = call(drv.device_get_attribute, cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                     device)
        program = _nvrtc(nvrtc.nvrtcCreateProgram, kernel.source.encode(), f"{kernel.name}.cu".encode(), 0, [], [])
        try:
            for name in names:  # C++ names are mangled; name expressions give each kernel's lowered name
                _nvrtc(nvrtc.nvrtcAddNameExpression, program, name.encode())
            options = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"-default-device",
                       *(o.encode() for o in kernel.options),
                       *(f"--include-path={folder}".encode() for folder in toolkit_includes())]
            (status,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
            if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                size = _nvrtc(nvrtc.nvrtcGetProgramLogSize, program)
                log = b" " * size
                _nvrtc(nvrtc.nvrtcGetProgramLog, program, log)
                text = log.decode(errors="replace").rstrip("\x00 \n")
                if "nv/target" in text and len(toolkit_includes()) < 2:
                    text += CCCL_MISSING
                raise KernelCompileError(kernel.name, text)
            size = _nvrtc(nvrtc.nvrtcGetCUBINSize, program)
            cubin = b" " * size
            _nvrtc(nvrtc.nvrtcGetCUBIN, program, cubin)
            lowered = {name: _nvrtc(nvrtc.nvrtcGetLoweredName, program, name.encode()) for name in names}
        finally:
            nvrtc.nvrtcDestroyProgram(program)
        return call(drv.module_load_data, cubin), lowered
