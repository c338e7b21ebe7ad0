"""Kernel: a GPU function launched by gpugraph, from CUDA/HIP C++ source compiled lazily per device, from a compiled
Module (PTX, cubin, fatbin) or from another library's compiled function; plus an optional CPU implementation."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _params
from ._device_like import DeviceLike
from ._errors import KernelCompileError
from ._kernel_args import make_converters, own_type
from ._memory import Array, reach
from ._params import Param
from ._scalars import as_int
from ._scalars import describe as _describe
from ._signature import KernelParam, absent_kernel, parse_declared, parse_signature

# A kernel's name: an identifier, qualified by namespaces or not, or a name expression instantiating a template
# (``axpb<double, 4>``, ``ns::axpb<float>``).
_NAME = re.compile(r"(?:::\s*)?(?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*(?:\s*<.*>)?", re.S)
# The launch limits CUDA checks (a block of at most 1024 threads), which the CPU backend reports as its properties too.
MAX_BLOCK_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)


@dataclass(frozen=True)
class LaunchConfig:
    """The launch shape a CPU implementation receives as its first argument."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0


def _dim(value: Any) -> int:
    """One dimension: an int (a NumPy one too), not a bool."""
    dim = as_int(value)
    if dim is None:
        raise TypeError
    return dim


def _dims(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    """Normalise an int or a 1-3 tuple of ints to a 3-tuple, checking CUDA's limits."""
    try:
        dims = (_dim(value),) if not isinstance(value, (tuple, list)) else tuple(_dim(v) for v in value)
    except TypeError:
        raise TypeError(f"{what}: expected an int or a tuple of 1 to 3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what}: expected 1 to 3 dimensions, got {len(dims)} ({value!r})")
    dims = dims + (1,) * (3 - len(dims))
    for axis, (d, limit) in enumerate(zip(dims, limits)):
        if not 1 <= d <= limit:
            raise ValueError(f"{what}: dimension {'xyz'[axis]} must be in 1..{limit}, got {d}")
    return dims  # type: ignore[return-value]


# Normalised launch shapes by input value. A program may launch with ever new grids (sized to its data), so
# each cache is emptied when a miss finds it full: a hit stays one dict lookup, and memory stays bounded.
_CACHE_LIMIT = 4096
_grid_cache: dict[Any, tuple[int, int, int]] = {}
_block_cache: dict[Any, tuple[int, int, int]] = {}


def _cache_key(value: Any) -> Any:
    """A key telling 4 from 4.0 (equal values hash alike), or None for uncacheable values."""
    if type(value) is int:
        return value
    if type(value) is tuple and all(type(v) is int for v in value):
        return (value,)
    return None


def _block_dims(value: Any) -> tuple[int, int, int]:
    b = _dims(value, "block", MAX_BLOCK)
    if b[0] * b[1] * b[2] > MAX_BLOCK_THREADS:
        raise ValueError(f"block: {b} has {b[0] * b[1] * b[2]} threads; a block holds at most {MAX_BLOCK_THREADS}")
    return b


def _cached(value: Any, cache: dict, normalize: Any) -> tuple[int, int, int]:
    key = _cache_key(value)
    dims = cache.get(key) if key is not None else None
    if dims is None:
        dims = normalize(value)
        if key is not None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[key] = dims
    return dims


def launch_dims(grid: Any, block: Any) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Validate and normalise a launch's grid and block, caching plain int inputs (a hot path)."""
    g = _grid_cache.get(grid) if type(grid) is int else None
    if g is None:
        g = _cached(grid, _grid_cache, lambda v: _dims(v, "grid", MAX_GRID))
    b = _block_cache.get(block) if type(block) is int else None
    if b is None:
        b = _cached(block, _block_cache, _block_dims)
    return g, b


# The shared memory a launch may use without opting in to more (cudaFuncSetAttribute's MaxDynamicSharedMemorySize,
# which gpugraph does not offer yet): a kernel's static shared memory (its compiler refuses more), and its static
# and the launch's dynamic shared memory together (the launch fails beyond it). The CPU backend refuses the same.
SHARED_MEM_LIMIT = 48 * 1024


def check_shared_mem(shared_mem: Any) -> int:
    """Return ``shared_mem`` as an int from 0 to ``SHARED_MEM_LIMIT`` or raise naming what was got."""
    if type(shared_mem) is int and 0 <= shared_mem <= SHARED_MEM_LIMIT:  # (the common case first: a hot path)
        return shared_mem
    if isinstance(shared_mem, bool) or not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise ValueError(f"shared_mem: expected a non-negative int, got {shared_mem!r}")
    if shared_mem > SHARED_MEM_LIMIT:
        raise ValueError(f"shared_mem: {int(shared_mem)} bytes is more than the {SHARED_MEM_LIMIT} bytes "
                         f"(48 KiB) of dynamic shared memory a launch may have without opting in to more, which "
                         f"gpugraph does not offer yet (CUDA refuses it: CUDA_ERROR_INVALID_VALUE)")
    return int(shared_mem)


def check_total_shared_mem(kernel: Kernel, static: int, shared_mem: int) -> None:
    """Refuse a launch of ``kernel``, whose ``__shared__`` variables take ``static`` bytes, with ``shared_mem`` bytes
    of dynamic shared memory where the two together pass the 48 KiB a launch may use without opting in to more."""
    if static + shared_mem > SHARED_MEM_LIMIT:
        raise ValueError(f"shared_mem: {kernel!r} declares {static} bytes of __shared__ variables, which with "
                         f"{shared_mem} bytes of dynamic shared memory pass the {SHARED_MEM_LIMIT} bytes "
                         f"(48 KiB) a launch may use without opting in to more, which gpugraph does not offer yet "
                         f"(CUDA refuses it: CUDA_ERROR_INVALID_VALUE)")


def _normalized(name: str) -> str:
    """A kernel name as the signature reader lists it: no space around ``::`` and no leading ``::`` (a template's
    arguments are left as written, as NVRTC takes them)."""
    base, bracket, arguments = name.partition("<")
    return re.sub(r"\s*::\s*", "::", base.strip()).removeprefix("::") + bracket + arguments


def _options(name: str, options: Any) -> tuple[str, ...]:
    """Compiler options as a tuple of str (None: none), or raise naming what was got. An include path is made
    absolute here: the kernel then means the same source wherever it is compiled later, and the caches that key
    a compiled module by its options never take one folder's headers for another's."""
    if options is None:
        return ()
    try:
        result = tuple(options) if not isinstance(options, (str, bytes)) else None
    except TypeError:
        result = None
    if result is None or not all(isinstance(o, str) for o in result):
        raise TypeError(f"Kernel {name!r}: options must be a sequence of str such as ('-use_fast_math',), "
                        f"or None, got {options!r}")
    return tuple(_absolute_include(option) for option in result)


def _absolute_include(option: str) -> str:
    if match := re.fullmatch(r"(-I|--include-path=)(.+)", option):
        return match[1] + os.path.abspath(match[2])
    return option


def _check_cpu(cpu: Any, what: str) -> None:
    if cpu is not None and not callable(cpu):
        raise TypeError(f"{what}: cpu must be callable or None, got {type(cpu).__name__}")


def _binary_name(name: Any, what: str) -> str:
    """A kernel's name as a compiled module or the driver spells it (``axpy``, a mangled ``_Z4axpyPfPKffi``), or raise
    naming what was got."""
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str, the kernel's name in the compiled code, got {name!r}")
    if not name or re.search(r"[\s\x00(),<>]", name):
        raise ValueError(f"{what}: name must be the kernel's name as the compiled code spells it: its identifier for "
                         f"an extern \"C\" kernel, else its mangled name (_Z...), got {name!r}")
    return name


class Kernel:
    """A ``__global__`` function, loaded once per device on first use and launched by streams and graph nodes.

    ``Kernel(source, name)`` compiles CUDA/HIP C++ source; ``Module(image).function(name, signature=...)`` takes a
    kernel of compiled code (PTX, cubin, fatbin); ``Kernel.from_function(handle, signature=..., device=...)`` takes a
    function another library compiled and loaded (CuPy's RawKernel, a CUfunction). All three launch, make nodes,
    take setters, Params and captures alike, and convert their arguments by their C signature.

    Args:
        source: CUDA/HIP C++ source holding the kernel.
        name: The kernel's name in ``source``, or a name expression that instantiates a template kernel
            (``"axpb<double>"``, as NVRTC takes one).
        options: Extra compiler options (NVRTC/hiprtc), e.g. ``("-use_fast_math",)``; None means none.
        cpu: Optional Python implementation for the CPU backend, called as ``cpu(launch, *args)`` with
            ``launch.grid``/``launch.block`` 3-tuples and array arguments as NumPy views. Without it, the
            CPU backend compiles ``source`` with the machine's C++ compiler (gpugraph.backends.cpu._compile).

    Raises:
        TypeError: If ``source``/``name`` are not strings, ``options`` is not None or a sequence of
            strings, or ``cpu`` is not callable.
        KernelCompileError: If ``source`` certainly declares no ``__global__`` function ``name`` (it never spells
            the name, and no header, macro pasting or option could make it): the error lists the kernels it has.

    Attributes:
        source: The C++ source ("" for a kernel of a Module or of another library).
        name: The kernel's name (in the compiled code, for a Module's kernel).
        signature: Its parameters (``KernelParam``), read from the source or the ``signature=`` given; None when
            gpugraph cannot tell them (arguments must then carry their own types).
        module: The Module the kernel comes from (``Module.function``), else None.
        handle: The address of another library's function (``Kernel.from_function``), else None.
        device: The Device that function belongs to (``Kernel.from_function``), else None.
    """

    module: Module | None
    handle: int | None
    device: Any

    def __init__(self, source: str, name: str, options: Sequence[str] | None = (),
                 cpu: Callable[..., Any] | None = None) -> None:
        if not isinstance(source, str):
            raise TypeError(f"Kernel: source must be a str of CUDA/HIP C++, got {type(source).__name__}")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise TypeError(f"Kernel: name must be the kernel's identifier (qualified by its namespaces or not), or "
                            f"a name expression that instantiates a template kernel such as 'axpb<double>', got "
                            f"{name!r}")
        name = _normalized(name)
        options = _options(name, options)
        _check_cpu(cpu, f"Kernel {name!r}")
        signature = parse_signature(source, name, options)
        if signature is None:
            # (Said here, on every backend: else the first use would refuse the arguments, which a kernel of unknown
            # signature takes only with types of their own, before any compiler could say that the name is wrong.)
            declared = absent_kernel(source, name, options)
            if declared is not None:
                raise KernelCompileError.no_kernel(
                    name, f"(it has: {', '.join(declared) if declared else 'no __global__ function'})")
        self._setup(source, name, options, cpu, signature)

    def _setup(self, source: str, name: str, options: tuple[str, ...], cpu: Callable[..., Any] | None,
               signature: tuple[KernelParam, ...] | None, module: Module | None = None, handle: int | None = None,
               device: DeviceLike | None = None, owner: object = None) -> None:
        """Set the kernel's fields and make its argument converters, whichever way it was made."""
        self.source = source
        self.name = name
        self.options = tuple(options)
        self.cpu = cpu
        self.module = module
        self.handle = handle
        self.device = device
        self._owner = owner  # (what holds another library's function loaded: its module lives while the Kernel does)
        self.signature: tuple[KernelParam, ...] | None = signature
        # Whether it launches graphs: it takes a graph to launch (cudaGraphLaunch), so it runs only as a kernel node.
        self.launches_graphs = signature is not None and any(p.graph_exec for p in signature)
        converters = (None if self.signature is None
                      else [make_converters(f"{self!r} argument {i} ({p})", p) for i, p in enumerate(self.signature)])
        # Per parameter: (stream launches' converter, graph nodes' converter), made once from the signature.
        self._converters = None if converters is None else tuple(c for c, _ in converters)
        self._typed_converters = None if converters is None else tuple(t for _, t in converters)
        # Backend function handles, one per Device, filled by _placement.load_kernel.
        self._functions: dict[Any, Any] = {}

    @classmethod
    def _without_source(cls, name: str | None, signature: Any, cpu: Callable[..., Any] | None, what: str,
                        fallback: str = "", module: Module | None = None, handle: int | None = None,
                        device: DeviceLike | None = None, owner: object = None) -> Kernel:
        """A kernel that comes as compiled code: named ``name``, else as its signature declares it, else
        ``fallback``."""
        _check_cpu(cpu, what)
        params, declared = (None, None) if signature is None else parse_declared(signature, what)
        kernel = cls.__new__(cls)
        kernel._setup("", name or declared or fallback, (), cpu, params, module, handle, device, owner)
        return kernel

    @classmethod
    def from_function(cls, handle: Any, signature: str | None = None, *, device: DeviceLike, name: str | None = None,
                      cpu: Callable[..., Any] | None = None) -> Kernel:
        """A kernel another library compiled and loaded, launched by gpugraph on the device it belongs to.

        Args:
            handle: The function: a CUfunction's address as an int, a ``cuda.bindings.driver.CUfunction``, or CuPy's
                ``RawKernel`` (its function for CuPy's current device) or ``cupy.cuda.Function``. For Numba, Triton
                and others, pass their CUfunction as an int (Triton: ``compiled.function``). gpugraph holds
                ``handle`` while the Kernel lives, so a library that unloads a function with its object keeps it.
            signature: The kernel's C parameters (``"float* y, const float* x, float a, int n"``) or declaration
                (``'extern "C" __global__ void axpy(...)'``), by which arguments are checked and converted as a
                source kernel's are; None: arguments must carry their own types (Arrays, NumPy scalars).
            device: The Device whose context the function was loaded in (a CUfunction runs in that context only;
                CuPy's is its current device): the kernel runs there, and a launch on another GPU is refused.
            name: The name repr and errors give it (default: the name its signature declares, CuPy's kernel name,
                else the handle's address).
            cpu: The CPU backend's implementation, called as ``cpu(launch, *args)``: the CPU backend cannot run
                another library's GPU code, so without it a use there is refused.

        Raises:
            TypeError: If ``handle`` is none of those, ``device`` no Device, ``signature`` no str, ``cpu`` not
                callable.
            ValueError: If ``handle`` is a null function, or ``signature`` cannot be read.

        See also: cuLaunchKernel (hipModuleLaunchKernel) with a hipFunction_t of another library.
        """
        what = "Kernel.from_function"
        address, known = _function_address(handle, what)
        if not (isinstance(getattr(device, "backend", None), str) and type(getattr(device, "index", None)) is int):
            raise TypeError(f"{what}: device must be the gg.Device the function was loaded on (CUfunctions belong to "
                            f"one device's context), got {device!r}")
        return cls._without_source(None if name is None else _binary_name(name, what), signature, cpu, what,
                                   known or f"CUfunction {address:#x}", handle=address, device=device, owner=handle)

    @property
    def from_source(self) -> bool:
        """Whether the kernel is compiled from its C++ source (not a Module's or another library's)."""
        return self.module is None and self.handle is None

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"

    def convert_args(self, args: tuple, device: DeviceLike, typed: bool = False, bind: bool = True) -> tuple:
        """Check ``args`` against the signature and return them as Arrays and NumPy scalars; with ``typed``,
        as graph nodes keep them (``typed_args`` of the result, in one pass).

        An untyped Param among them takes the type of its parameter (``bind_params``) once every argument has
        been accepted; with ``bind=False`` the caller binds them once its whole call has been accepted. Either
        way a refused call leaves every Param as it was.

        Raises:
            TypeError: On a wrong argument count or an argument of an unsupported type.
        """
        converters = self._typed_converters if typed else self._converters
        if converters is None:
            return tuple(_convert_unknown(self, i, a, device) for i, a in enumerate(args))
        if len(args) != len(converters):
            raise TypeError(f"{self!r} takes {len(converters)} arguments "
                            f"({', '.join(map(str, self.signature or ()))}), got {len(args)}")
        converted = tuple([c(a, device) for c, a in zip(converters, args)])
        # (No Param made yet: none to look for.)
        if _params.in_use and self._untyped_params(converted) and bind:
            self.bind_params(converted)
        return converted

    def _untyped_params(self, args: tuple) -> bool:
        """Whether ``args`` hold an untyped Param; refuse one passed for two parameters of different types (it
        would take both)."""
        signature = self.signature or ()
        first: dict[int, int] = {}  # id(Param) -> the index of the first parameter it is passed for
        for i, arg in enumerate(args):
            if type(arg) is Param and arg.dtype is None:
                j = first.setdefault(id(arg), i)
                if signature[j].dtype != signature[i].dtype:
                    raise TypeError(f"{self!r} argument {i} ({signature[i]}): {arg!r} is passed for argument {j} "
                                    f"({signature[j]}) too, and a Param holds one type; pass two Params, or give "
                                    f"it one with dtype=")
        return bool(first)

    def bind_params(self, args: tuple) -> None:
        """Give each untyped Param among ``args`` (as ``convert_args`` returned them) the type of the parameter it
        is passed for: called once the call passing them has been accepted."""
        if self.signature is None:
            return  # (such a kernel takes typed Params only)
        for param, arg in zip(self.signature, args):
            if type(arg) is Param and arg.dtype is None and param.dtype is not None:
                arg.bind(param.dtype)

    def typed_args(self, args: tuple) -> tuple:
        """Converted arguments with plain Python numbers as the NumPy types of the C signature.

        ``convert_args`` leaves checked Python numbers as they are, for the speed of stream launches
        (GPU backends pack them as the C types); graph nodes and CPU implementations get NumPy types.
        """
        return _typed(self, args)


def _function_address(handle: Any, what: str) -> tuple[int, str | None]:
    """The address of the CUfunction ``handle`` names, and the kernel's name where the handle's library knows it."""
    kind = type(handle)
    library = kind.__module__.partition(".")[0]
    name = None
    if kind is bool or kind is np.bool_:
        address = -1
    elif isinstance(handle, (int, np.integer)) or (kind.__name__ == "CUfunction" and library == "cuda"):
        address = int(handle)  # (an address, or cuda-bindings' handle: cuModuleGetFunction's, whose int it is)
    elif kind.__name__ == "RawKernel" and library == "cupy":  # its cupy.cuda.Function for CuPy's current device
        address, name = handle.kernel.ptr, handle.name
    elif kind.__name__ == "Function" and library == "cupy":  # a loaded CuPy function: .ptr is its CUfunction
        address = handle.ptr
    else:
        raise TypeError(f"{what}: handle must be a CUfunction: its address as an int, a cuda.bindings.driver."
                        f"CUfunction, or CuPy's RawKernel or cupy.cuda.Function (for Numba, Triton and other "
                        f"libraries, pass their CUfunction as an int), got {type(handle).__name__}")
    if not 0 < address < 2**64:
        raise ValueError(f"{what}: handle must be a loaded function, got {'a bool' if address == -1 else address} "
                         f"(a CUfunction's address is a positive 64-bit number)")
    return address, name


_ELF = b"\x7fELF"  # a cubin
_FATBIN = (b"\x50\xed\x55\xba", b"\xb1\x43\x62\x46")  # a fatbin's magic (0xBA55ED50), its wrapper's (0x466243B1)
_PTX_COMMENT = re.compile(rb"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:[^\"\\\n]|\\.)*\"", re.S)
_PTX_VERSION = re.compile(rb"^\s*\.version\s+\d", re.M)
_PTX_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$%][\w$]*)")


class Module:
    """Compiled GPU code holding kernels, loaded once per device on first use (all its kernels share the loaded
    module, and its ``__device__`` variables).

    Args:
        image: The code: a path (a str or ``os.PathLike``) of a ``.ptx``, ``.cubin`` or ``.fatbin`` file, read now;
            or the code itself, as bytes (a bytes-like object) or as PTX text (a str of several lines, as
            ``nvrtcGetPTX``, Numba's ``compile_ptx`` or Triton's ``asm["ptx"]`` give it).

    Raises:
        TypeError: If ``image`` is none of those.
        ValueError: If it is empty.
        OSError: If the file cannot be read.

    The driver reads the code when a kernel of it is first used on a device (``cuModuleLoadData``): an image it
    refuses (not PTX, a cubin or a fatbin, none of them for the device's architecture, PTX newer than the driver)
    raises ``BackendError`` there, naming the driver's error. The CPU backend runs no compiled GPU code: a Module's
    kernel runs there only with a Python implementation (``function(..., cpu=fn)``).

    See also: hipModuleLoad, hipModuleLoadData (cuModuleLoad, cuModuleLoadData).
    """

    def __init__(self, image: Any) -> None:
        self.path: str | None = None
        if (isinstance(image, str) and "\n" not in image) or isinstance(image, os.PathLike):
            self.path = os.fspath(image)
            try:
                with open(self.path, "rb") as file:
                    data = file.read()
            except OSError as exc:
                raise type(exc)(f"Module: cannot read the module file {self.path!r}: {exc.strerror or exc} (a str "
                                f"without line breaks is a file's path; give PTX text as a str of its lines, or the "
                                f"code as bytes)") from None
        elif isinstance(image, str):
            data = image.encode()
        else:
            try:
                data = bytes(memoryview(image))
            except TypeError:
                raise TypeError(f"Module: image must be a path (str or os.PathLike) of a PTX, cubin or fatbin file, "
                                f"or the code as bytes (or PTX text as a str), got {type(image).__name__}") from None
        if not data.strip(b"\x00 \t\r\n"):
            raise ValueError(f"Module: the code {'in ' + repr(self.path) if self.path else 'given'} is empty")
        if data.startswith(_ELF):
            self.format = "cubin"
        elif data.startswith(_FATBIN):
            self.format = "fatbin"
        else:
            self.format = "PTX" if _PTX_VERSION.search(_PTX_COMMENT.sub(b" ", data)) else "code"
            # (The driver reads PTX up to a NUL, and may take unknown code for PTX: it never reads past the end.)
            data = data if data.endswith(b"\x00") else data + b"\x00"
        self.image = data
        """The code the driver loads (text with its NUL appended)."""
        # The kernels the code holds, where gpugraph can tell them all: PTX's .entry directives (with no preprocessor
        # directive, which could make one); None for binary code, which the driver reads.
        text = _PTX_COMMENT.sub(b" ", data) if self.format == "PTX" else b""
        self._entries: tuple[str, ...] | None = None
        if self.format == "PTX" and not re.search(rb"^\s*#", text, re.M):
            self._entries = tuple(sorted({m.decode() for m in _PTX_ENTRY.findall(text)}))

    def __repr__(self) -> str:
        return f"Module({self.path!r})" if self.path else f"Module(<{self.format}, {len(self.image)} bytes>)"

    def function(self, name: str, signature: str | None = None, cpu: Callable[..., Any] | None = None) -> Kernel:
        """The kernel ``name`` of this module, as a Kernel.

        Args:
            name: Its name as the compiled code spells it: the identifier of an ``extern "C"`` kernel, else its mangled
                C++ name (``_Z4axpyPfPKffi``; ``cuobjdump -symbols`` or NVRTC's ``nvrtcGetLoweredName`` give it).
            signature: Its C parameters (``"float* y, const float* x, float a, int n"``) or declaration
                (``'extern "C" __global__ void axpy(float* y, ...)'``): compiled code carries no C types, so this is
                what arguments are checked and converted by, as a source kernel's are (on CUDA also checked against
                the loaded kernel's parameter sizes). None: arguments must carry their own types (Arrays, NumPy
                scalars), and CUDA checks their count and sizes.
            cpu: The CPU backend's implementation, called as ``cpu(launch, *args)`` (the CPU backend cannot run
                compiled GPU code: without it, a use there is refused).

        Raises:
            TypeError: If ``name`` or ``signature`` is not a str, or ``cpu`` not callable.
            ValueError: If ``signature`` cannot be read, or this PTX certainly has no kernel ``name``. A cubin's or
                fatbin's kernels are known once loaded: a name it lacks is refused at the first use on a GPU.

        See also: hipModuleGetFunction (cuModuleGetFunction).
        """
        what = f"{self!r}.function"
        name = _binary_name(name, what)
        if self._entries is not None and name not in self._entries:
            raise ValueError(f"{what}: the PTX has no kernel {name!r} (it has: {', '.join(self._entries) or 'none'}); "
                             f"a C++ kernel's name there is its mangled name (_Z...) unless it is declared "
                             f"extern \"C\"")
        return Kernel._without_source(name, signature, cpu, what, module=self)


# A Kernel's backend function handles, one per device (what _placement.load_kernel loads and keeps).


def loaded_function(kernel: Kernel, device: DeviceLike) -> Any:
    """The backend's function handle of ``kernel`` on ``device``, once loaded there, else None."""
    return kernel._functions.get(device)


def keep_function(kernel: Kernel, device: DeviceLike, function: Any) -> None:
    """Keep ``function``, the backend's handle of ``kernel`` just loaded on ``device``."""
    kernel._functions[device] = function


def _typed(kernel: Kernel, args: tuple) -> tuple:
    """``args`` with plain Python numbers turned into the NumPy scalar types of the C signature."""
    signature = kernel.signature
    if signature is None:
        return args
    return tuple([p.dtype.type(a) if (type(a) is float or type(a) is int) and p.dtype is not None else a
                  for p, a in zip(signature, args)])


def _convert_unknown(kernel: Kernel, index: int, value: Any, device: DeviceLike) -> Any:
    """Arguments of a kernel whose signature gpugraph could not read must carry their own type."""
    if type(value) is Array and value.device is not device:
        reach(device, value, f"{kernel!r} argument {index}")
    if type(value) is Array:
        return value
    if isinstance(value, np.generic):
        return own_type(value, f"{kernel!r} argument {index}")
    if type(value) is Param and value.dtype is not None:
        return value
    if kernel.from_source:
        why = (f"gpugraph cannot read `__global__ void {kernel.name}(...)` from the source (not found, or macros "
               f"decide its parameters)")
    else:
        why = "it was made without signature= (compiled code carries no C types)"
    raise TypeError(f"{kernel!r} argument {index}: {why}, so arguments must be Arrays or NumPy scalars; got "
                    f"{_describe(value)}")
