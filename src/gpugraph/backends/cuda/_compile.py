"""Kernels' functions on a device: their source compiled with NVRTC once per (device, source, options), a Module's
code loaded once per device, another library's function taken as it is."""

from __future__ import annotations

import functools
import threading
from typing import Any

from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

from ..._errors import BackendError, KernelCompileError
from ..._signature import kernel_names
from ._driver import call, error
from ._symbols import drv


def _nvrtc(fn: Any, *args: Any) -> Any:
    result = fn(*args)
    if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise BackendError("cuda", fn.__name__, result[0].name, number=int(result[0]))
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
        self._images: dict[tuple[int, Any], Any] = {}  # a Module's CUmodule by (device, Module)
        self._lock = threading.Lock()

    def function(self, index: int, device: Any, kernel: Any) -> Any:
        """The CUfunction of ``kernel`` on device ``index``: compiling its source, or loading its Module, on first
        use; another library's function as it is, on its own device only."""
        if kernel.module is not None:
            return self._module_function(index, device, kernel)
        if kernel.handle is not None:
            owner = kernel.device
            if owner.backend != "cuda" or owner.index != index:
                raise ValueError(f"{kernel!r} is another library's function loaded on {owner}, and a CUfunction runs "
                                 f"only in the context it was loaded in: use it on {owner}, or give Kernel."
                                 f"from_function the library's function for cuda:{index}")
            return cu.CUfunction(kernel.handle)
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

    def _module_function(self, index: int, device: Any, kernel: Any) -> Any:
        """The CUfunction of a Module's kernel, loading the Module on device ``index`` first (once: its kernels share
        the loaded module)."""
        with self._lock:
            loaded = self._images.get((index, kernel.module))
            if loaded is None:
                err, loaded = drv.module_load_data(kernel.module.image)
                if err:
                    raise _load_error(err, index, device, kernel.module)
                self._images[(index, kernel.module)] = loaded
        err, function = drv.module_get_function(loaded, kernel.name.encode())
        if err == cu.CUresult.CUDA_ERROR_NOT_FOUND:
            names = _function_names(loaded)
            listed = f" (it has: {', '.join(names) or 'none'})" if names is not None else ""
            raise ValueError(f"{kernel.module!r}.function({kernel.name!r}): the module loaded on cuda:{index} has no "
                             f"kernel {kernel.name!r}{listed}; a C++ kernel's name there is its mangled name (_Z...) "
                             f"unless it is declared extern \"C\"")
        if err:
            raise error("cuModuleGetFunction", err)
        return function

    @staticmethod
    def _unload(compiled: tuple[Any, dict[str, bytes]]) -> None:
        call(drv.module_unload, compiled[0])

    @staticmethod
    def _compile(device: Any, kernel: Any, names: list[str]) -> tuple[Any, dict[str, bytes]]:
        major, minor = _capability(device)
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


def _capability(device: Any) -> tuple[int, int]:
    """The compute capability (major, minor) of the CUdevice ``device``."""
    attribute = cu.CUdevice_attribute
    return (call(drv.device_get_attribute, attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
            call(drv.device_get_attribute, attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))


def _load_error(err: Any, index: int, device: Any, module: Any) -> BackendError:
    """The error for a Module's code the driver refused to load (cuModuleLoadData's result ``err``): the driver's
    words, the Module, the device and what code it takes."""
    refused = error("cuModuleLoadData", err)
    major, minor = _capability(device)
    _, text = drv.get_error_string(err)
    text = text.decode() if isinstance(text, bytes) else ""
    return BackendError(refused.backend, refused.api, refused.code, number=refused.number,
                        detail=f"{text}: {module!r} cannot be loaded on cuda:{index}, a device of compute "
                        f"capability {major}.{minor}: give it PTX the driver can compile (from a CUDA no newer than "
                        f"the driver), or a cubin or fatbin holding code for sm_{major}{minor}")


def _function_names(module: Any) -> list[str] | None:
    """The names of the kernels of the loaded ``module``, or None where the driver cannot list them (one older than
    CUDA 12.4): a courtesy of the error that reports a name the module lacks."""
    err, count = drv.module_get_function_count(module)
    if err:
        return None
    err, functions = drv.module_enumerate_functions(count, module)
    if err:
        return None
    names = []
    for function in list(functions)[:count]:
        err, name = drv.func_get_name(function)
        if err:
            return None
        names.append(name.decode() if isinstance(name, bytes) else str(name))
    return sorted(names)
