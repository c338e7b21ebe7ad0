"""Kernel: CUDA/HIP C++ source compiled lazily per device, plus an optional CPU implementation."""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._conditions import Condition
from ._memory import Array
from ._params import Param
from ._scalars import bounds, is_number, to_c
from ._scalars import describe as _describe
from ._signature import EXEC_TYPES, KernelParam, parse_signature

# gpugraph._exec's GraphExec and the argument a kernel takes for one (a cudaGraphExec_t), set when that module, which
# sits above kernels, is imported.
graph_exec_type: Any = None
exec_argument: Callable[[Any, Any, str], Any] = None  # type: ignore[assignment]

# Another library's device array given for a pointer parameter, viewed as an Array (None: no such array):
# gpugraph._interop's kernel_argument, set when that module, which sits above kernels, is imported.
foreign_array: Callable[[Any, Any, str], Array | None] = None  # type: ignore[assignment]  # (set before any call)

# A kernel's name: an identifier, qualified by namespaces or not, or a name expression instantiating a template
# (``axpb<double, 4>``, ``ns::axpb<float>``).
_NAME = re.compile(r"(?:::\s*)?(?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*(?:\s*<.*>)?", re.S)
_MAX_BLOCK_THREADS = 1024
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)


@dataclass(frozen=True)
class LaunchConfig:
    """The launch shape a CPU implementation receives as its first argument."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0


def _dims(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    """Normalise an int or a 1-3 tuple of ints to a 3-tuple, checking CUDA's limits."""
    try:
        dims = (operator.index(value),) if not isinstance(value, (tuple, list)) else tuple(
            operator.index(v) for v in value)
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
    b = _dims(value, "block", _MAX_BLOCK)
    if b[0] * b[1] * b[2] > _MAX_BLOCK_THREADS:
        raise ValueError(f"block: {b} has {b[0] * b[1] * b[2]} threads; a block holds at most {_MAX_BLOCK_THREADS}")
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
        g = _cached(grid, _grid_cache, lambda v: _dims(v, "grid", _MAX_GRID))
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


def check_total_shared_mem(kernel: Any, static: int, shared_mem: int) -> None:
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


class Kernel:
    """A ``__global__`` function in CUDA/HIP C++ source, compiled lazily once per device.

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
    """

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
        if cpu is not None and not callable(cpu):
            raise TypeError(f"Kernel {name!r}: cpu must be callable or None, got {type(cpu).__name__}")
        self.source = source
        self.name = name
        self.options = tuple(options)
        self.cpu = cpu
        self.signature: tuple[KernelParam, ...] | None = parse_signature(source, name, self.options)
        converters = (None if self.signature is None
                      else [_converter(self, i, p) for i, p in enumerate(self.signature)])
        # Per parameter: (stream launches' converter, graph nodes' converter), made once from the signature.
        self._converters = None if converters is None else tuple(c for c, _ in converters)
        self._typed_converters = None if converters is None else tuple(t for _, t in converters)
        # Backend function handles, one per Device, filled by Device.load_kernel.
        self._functions: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"

    def convert_args(self, args: tuple, device: Any, typed: bool = False) -> tuple:
        """Check ``args`` against the signature and return them as Arrays and NumPy scalars; with ``typed``,
        as graph nodes keep them (``typed_args`` of the result, in one pass).

        Raises:
            TypeError: On a wrong argument count or an argument of an unsupported type.
        """
        converters = self._typed_converters if typed else self._converters
        if converters is None:
            return tuple(_convert_unknown(self, i, a, device) for i, a in enumerate(args))
        if len(args) != len(converters):
            raise TypeError(f"{self!r} takes {len(converters)} arguments "
                            f"({', '.join(map(str, self.signature or ()))}), got {len(args)}")
        return tuple([c(a, device) for c, a in zip(converters, args)])

    def typed_args(self, args: tuple) -> tuple:
        """Converted arguments with plain Python numbers as the NumPy types of the C signature.

        ``convert_args`` leaves checked Python numbers as they are, for the speed of stream launches
        (GPU backends pack them as the C types); graph nodes and CPU implementations get NumPy types.
        """
        return _typed(self, args)


def _typed(kernel: Kernel, args: tuple) -> tuple:
    """``args`` with plain Python numbers turned into the NumPy scalar types of the C signature."""
    signature = kernel.signature
    if signature is None:
        return args
    return tuple([p.dtype.type(a) if (type(a) is float or type(a) is int) and p.dtype is not None else a
                  for p, a in zip(signature, args)])


_Convert = Callable[[Any, Any], Any]  # (value, device) -> the value as a launch or a node keeps it


def _converter(kernel: Kernel, index: int, param: KernelParam) -> tuple[_Convert, _Convert]:
    """The converters of one argument: for stream launches, and for graph nodes (numbers typed as ``_typed``
    types them)."""
    where = f"{kernel!r} argument {index} ({param})"
    if param.pointer:
        want = param.dtype
        addresses = " (a pointer to pointers takes an Array of device addresses)" if param.depth > 1 else ""

        def to_pointer(value: Any, device: Any) -> Any:
            if type(value) is Param:
                if not value.is_array:
                    raise TypeError(f"{where}: expects a device Array, got a scalar {value!r}")
                to_pointer(value.value, device)  # the Array it points at now must fit
                return value
            if type(value) is Array:
                if value.device is not device:
                    device._reach(value, where)
                # NumPy's builtin dtypes are singletons: identity settles the common case cheaply.
                if want is not None and value.dtype is not want and value.dtype != want:
                    raise TypeError(f"{where}: expects {want} data{addresses}, got an Array of {value.dtype}")
                return value
            view = foreign_array(value, device, where)  # another library's device array, viewed without a copy
            if view is not None:
                return to_pointer(view, device)
            hint = " (copy it to the device with dev.asarray first)" if isinstance(value, np.ndarray) else ""
            raise TypeError(f"{where}: expects a device Array, got {_describe(value)}{hint}")
        return to_pointer, to_pointer

    if EXEC_TYPES.intersection(param.ctype.split()):  # a graph the kernel launches: a GraphExec names it, no number

        def to_graph_exec(value: Any, device: Any) -> Any:
            return exec_argument(value, device, where)
        return to_graph_exec, to_graph_exec

    dtype: Any = param.dtype
    ctype = param.ctype
    known = dtype is not None
    integral, low, high = bounds(dtype) if known else (False, None, None)

    def to_scalar(value: Any, device: Any) -> Any:
        kind = type(value)
        # The common case first: a Python number in range for a parameter of known type stays a Python number
        # (backends write it as the C type: CUDA packs it, the CPU backend converts it). Everything else
        # (floats for integers, inf, nan, out of range) takes the rules of _scalars.to_c.
        if (kind is float or kind is int) and known:
            if (kind is int or not integral) and low <= value <= high:
                return value
            return to_c(value, dtype, ctype, where)
        if kind is graph_exec_type:
            raise TypeError(f"{where}: a GraphExec is passed only for a cudaGraphExec_t parameter, not a C {ctype}")
        if kind is Condition:
            raise TypeError(f"{where}: a Condition is passed only to kernels of its graph (Graph.add_kernel, or a "
                            f"launch on a stream capturing into that graph); a stream launch outside a capture "
                            f"cannot take one")
        if kind is Param:
            if value.is_array:
                raise TypeError(f"{where}: expects a C {ctype} scalar, got {value!r}")
            if not known:
                if value.dtype is None:
                    raise TypeError(f"{where}: gpugraph cannot tell the C type {ctype!r}; give the Param a dtype")
            else:
                value.bind(dtype, where)
            return value
        if known:
            return to_c(value, dtype, ctype, where)
        if isinstance(value, np.generic):
            return _own_type(value, where)
        raise TypeError(f"{where}: gpugraph cannot tell the C type {ctype!r}; "
                        f"pass a NumPy scalar of the right type, got {_describe(value)}")
    if not known:
        return to_scalar, to_scalar
    make = dtype.type

    def to_typed_scalar(value: Any, device: Any) -> Any:
        kind = type(value)
        if (kind is float or kind is int) and (kind is int or not integral) and low <= value <= high:
            return make(value)  # (the common case, as in to_scalar)
        if kind is Condition:  # (kept: the graph checks it is one of its own, then passes its handle)
            if dtype != np.uint64:
                raise TypeError(f"{where}: a Condition is passed for a cudaGraphConditionalHandle (unsigned long "
                                f"long) parameter, not a C {ctype}")
            return value
        value = to_scalar(value, device)
        kind = type(value)
        return make(value) if kind is float or kind is int else value
    return to_scalar, to_typed_scalar


def _own_type(value: np.generic, where: str) -> np.generic:
    """A NumPy scalar passed where gpugraph cannot tell the C type: it must be a C number type."""
    if not is_number(value) or value.dtype.itemsize > 8:
        raise TypeError(f"{where}: expects a NumPy bool, integer or floating scalar of at most 8 bytes (a C "
                        f"number type), got {_describe(value)}")
    return value


def _convert_unknown(kernel: Kernel, index: int, value: Any, device: Any) -> Any:
    """Arguments of a kernel whose signature gpugraph could not read must carry their own type."""
    if type(value) is Array and value.device is not device:
        device._reach(value, f"{kernel!r} argument {index}")
    if type(value) is Array:
        return value
    if isinstance(value, np.generic):
        return _own_type(value, f"{kernel!r} argument {index}")
    if type(value) is Param and value.dtype is not None:
        return value
    raise TypeError(f"{kernel!r} argument {index}: gpugraph cannot read `__global__ void {kernel.name}(...)` "
                    f"from the source (not found, or macros decide its parameters), so arguments must be "
                    f"Arrays or NumPy scalars; got {_describe(value)}")
