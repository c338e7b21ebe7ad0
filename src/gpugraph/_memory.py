"""Array (device memory) and the checks shared by every operation that reads or writes memory."""

from __future__ import annotations

import operator
from typing import Any, NoReturn

import numpy as np

from ._capture_rules import forbid_unsafe, synchronize_device
from ._device_like import DeviceLike
from ._dlpack import device_tuple, export
from ._scalars import describe
from .backends import get_backend
from .backends._host_registry import HostRegistrationError


class Array:
    """A block of device memory viewed as a C-contiguous array of ``shape`` and ``dtype``.

    Arrays come from a Device (``empty``, ``zeros``, ``asarray``, ``empty_like``), a stream
    (``alloc``) or a graph allocation node (``node.array``); they are never built directly.

    Attributes:
        device: The Device the memory lives on.
        ptr: The device address (int).
        shape: Tuple of ints.
        dtype: NumPy dtype of the elements.
        nbytes: Size in bytes.
    """

    __slots__ = ("device", "ptr", "shape", "dtype", "nbytes", "_alloc", "__weakref__")
    device: Any
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    _alloc: Any

    def __init__(self, device: DeviceLike, ptr: int, shape: tuple[int, ...], dtype: np.dtype, alloc: Any) -> None:
        init = object.__setattr__  # (the fields are read-only: __setattr__ refuses them)
        init(self, "device", device)
        init(self, "ptr", ptr)
        init(self, "shape", shape)
        init(self, "dtype", dtype)
        init(self, "nbytes", Array.bytes_for(shape, dtype))
        init(self, "_alloc", alloc)  # the backend's record of the allocation

    def __setattr__(self, name: str, value: object) -> None:
        """Refused: an Array's address, shape, dtype and device describe memory the backend allocated, and kernels,
        copies and ``to_numpy`` trust them (a larger shape would reach past the allocation)."""
        raise AttributeError(f"Array.{name}: an Array's fields are read-only (they describe the memory it was "
                             f"allocated as); got an assignment of {describe(value)}; allocate another Array "
                             f"(dev.empty(shape, dtype)) or copy into one of the shape you need")

    def __reduce__(self) -> Any:
        """Refused: an Array is this process's device memory, whose address means nothing to another process, and a
        copy by ``copy.copy`` or ``pickle`` would share the memory as a second owner."""
        raise TypeError(f"{self!r} cannot be pickled or copied by the copy module: it is device memory of this "
                        f"process; pickle array.to_numpy() instead, or copy it on the device with "
                        f"stream.memcpy(dev.empty_like(array), array)")

    @staticmethod
    def bytes_for(shape: tuple[int, ...], dtype: np.dtype) -> int:
        """Bytes needed by an array of ``shape`` and ``dtype``."""
        n = dtype.itemsize
        for d in shape:
            n *= d
        return n

    @property
    def size(self) -> int:
        """Number of elements."""
        return self.nbytes // self.dtype.itemsize

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA Array Interface (version 3), so CuPy, PyTorch and Numba use the memory without a copy.

        Raises:
            AttributeError: On a backend other than CUDA (so ``hasattr`` tells whether it applies).
        """
        if not get_backend(self.device.backend).speaks_cuda:
            raise AttributeError(f"__cuda_array_interface__: {self!r} is not CUDA memory")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def __dlpack__(self, *, stream: object = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of this memory, for ``torch.from_dlpack``, ``cupy.from_dlpack``,
        ``numpy.from_dlpack`` (CPU backend) and ``gg.from_dlpack``, as the array API standard says.

        A consumer passing ``max_version >= (1, 0)`` (NumPy 2 does) gets a versioned capsule with the
        READ_ONLY flag clear, any other a legacy one. ``stream`` must be None for CPU memory; on a GPU the
        export adds no synchronization, whatever ``stream`` says: work writing the array must have
        finished, or be ordered before the consumer's work. ``copy=True`` exports a copy on the same
        device; ``dl_device=(1, 0)`` a host copy of GPU memory (both after the device's work finished).

        Raises:
            BufferError: For a dtype DLPack cannot express, a ``dl_device`` other than the Array's own
                or the host, or ``copy=False`` with a ``dl_device`` that needs a copy.
            ValueError: For a ``stream`` other than None with CPU memory (or 0 or < -1 on a GPU).
        """
        return export(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, device index)."""
        return device_tuple(self.device)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Refused: NumPy would otherwise make a 0-d object array holding the Array (``np.asarray(array)``)."""
        raise TypeError(f"np.asarray/np.array: {self!r} is device memory, not a host sequence; use array.to_numpy() "
                        f"for a host copy (it waits for the device's work), or np.from_dlpack(array) for the memory "
                        f"itself on the CPU backend")

    def __getitem__(self, key: object) -> NoReturn:
        """Refused: an Array has no elements on the host and no views (a kernel, a copy or ``to_numpy`` reads it)."""
        raise TypeError(f"{self!r}[{key!r}]: an Array is device memory, with no indexing, slicing or views; use "
                        f"array.to_numpy()[...] for a host copy, or a box copy (stream.memcpy(dst, array, shape=..., "
                        f"src_origin=...)) for part of it on the device")

    def __setitem__(self, key: object, value: object) -> NoReturn:
        """Refused, as ``__getitem__`` is."""
        raise TypeError(f"{self!r}[{key!r}] = ...: an Array is device memory, with no item assignment; use "
                        f"stream.memset(array, value) or a copy (stream.memcpy, with shape= and dst_origin= for part "
                        f"of it)")

    def to_numpy(self) -> np.ndarray:
        """Wait for all work on the device, then copy the contents into a new NumPy array.

        See also: cudaMemcpy (device to host).
        """
        synchronize_device(self.device, "Array.to_numpy")
        out = np.empty(self.shape, self.dtype)
        get_backend(self.device.backend).copy(out, self, self.nbytes)
        return out

    def __repr__(self) -> str:
        return f"Array(shape={self.shape}, dtype={self.dtype}, ptr={self.ptr:#x}, device={self.device})"


def allocation_of(array: Array) -> Any:
    """The backend's record of the memory ``array`` is part of (its Allocation: origin, whether live, its owner)."""
    return array._alloc


def enable_peer_access(device: DeviceLike, peer: DeviceLike, what: str) -> None:
    """Let work on ``device`` access memory of ``peer`` (another device of its backend), where it cannot yet:
    ValueError where the hardware allows no peer access between them; an unsafe call while a capture runs."""
    backend, index = get_backend(device.backend), device.index
    if backend.peer_access(index, peer.index):
        return
    if not backend.device_can_access_peer(index, peer.index):
        raise ValueError(f"{what}: {device} cannot access memory of {peer}: the hardware allows no peer access "
                         f"between them (cudaDeviceCanAccessPeer); copy the data with Stream.memcpy instead")
    forbid_unsafe(f"{what} (enabling peer access from {device} to {peer})")
    backend.enable_peer_access(index, peer.index)


def reach(device: DeviceLike, array: Array, what: str) -> None:
    """Let work on ``device`` use ``array``, an Array of another device: refused for a device of another backend,
    else peer access is enabled where it is not yet (ValueError where the hardware allows none)."""
    other = array.device
    if other.backend != device.backend:
        raise ValueError(f"{what}: the Array is on {other}, the launch on {device}")
    alloc = allocation_of(array)
    if alloc.origin == "graph":
        # A graph allocation's access is fixed when its node is made (CUDA maps it for the devices its
        # access descriptors name, with no peer access to enable); any other device would fault.
        if device.index in alloc.access:
            return
        raise ValueError(f"{what}: the Array is graph memory of {other}, which kernels on {device} cannot use: "
                         f"its allocation node gave no access to {device} (Graph.add_alloc(access={device}), or "
                         f"{device}.enable_peer_access({other}) before the capture that allocated it)")
    enable_peer_access(device, other, f"{what} (an Array of {other} used on {device})")


def normalize_shape(shape: Any) -> tuple[int, ...]:
    """Return ``shape`` as a tuple of non-negative ints, or raise naming what was got."""
    try:
        dims = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(
            operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape: expected an int or a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape: dimensions must be non-negative, got {shape!r}")
    return dims


def normalize_dtype(dtype: Any) -> np.dtype:
    """Return ``dtype`` as a NumPy dtype of fixed-size plain data, or raise naming what was got."""
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype: expected a NumPy dtype, got {dtype!r}") from None
    if result.hasobject or result.itemsize == 0:
        raise TypeError(f"dtype: expected a fixed-size plain-data dtype, got {result}")
    return result


def operand_nbytes(value: Any, what: str, *, writable: bool = False) -> int:
    """Size in bytes of a memory operand (an Array or a C-contiguous NumPy array)."""
    if type(value) is Array:
        return value.nbytes
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:  # its bytes are pointers to Python objects: a copy would corrupt them
            raise TypeError(f"{what}: the NumPy array has dtype {value.dtype}, which holds Python objects; copies "
                            f"move plain data only (convert it, e.g. arr.astype(np.float64))")
        if not value.flags.c_contiguous:
            raise ValueError(f"{what}: NumPy arrays must be C-contiguous, got strides {value.strides}; copy it into "
                             f"one first (np.ascontiguousarray(array))")
        if writable and not value.flags.writeable:
            raise ValueError(f"{what}: the NumPy array is read-only, and this copy writes it; copy into a writable "
                             f"array")
        return value.nbytes
    raise TypeError(f"{what}: expected an Array or a NumPy array, got {type(value).__name__}")


def memcpy_nbytes(dst: Any, src: Any, nbytes: Any, what: str = "memcpy", *, node: bool = False) -> int:
    """Check a copy's operands and return how many bytes it moves.

    Without ``nbytes`` the operands must have the same dtype and size (a copy between dtypes would
    reinterpret the bytes); with it, any operands (a byte copy). A copy node (``node=True``) must move at
    least one byte, as CUDA refuses a 0-byte copy node.
    """
    dst_n = operand_nbytes(dst, f"{what}(dst)", writable=True)
    src_n = operand_nbytes(src, f"{what}(src)")
    if nbytes is None:
        if dst.dtype is not src.dtype and dst.dtype != src.dtype:
            raise TypeError(f"{what}: dst is {dst.dtype} and src is {src.dtype}; a copy between different "
                            f"dtypes would reinterpret the bytes (convert src first, or pass nbytes= to copy "
                            f"the bytes as they are)")
        if dst_n != src_n:
            raise ValueError(f"{what}: dst holds {dst_n} bytes and src {src_n} bytes; "
                             f"the sizes must match or nbytes must be given")
        n = dst_n
    else:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"{what}: nbytes must be a non-negative int, got {nbytes!r}")
        if nbytes > min(dst_n, src_n):
            raise ValueError(f"{what}: nbytes={nbytes} exceeds dst ({dst_n} bytes) or src ({src_n} bytes)")
        n = int(nbytes)
    if node and not n:
        raise ValueError(f"{what}: a copy node must copy at least one byte, got 0 bytes (CUDA refuses a "
                         f"0-byte copy node)")
    return n


def byte_bounds(array: np.ndarray) -> tuple[int, int]:
    """The first byte and the byte past the last that ``array``'s elements occupy, whatever its strides."""
    start = end = array.__array_interface__["data"][0]
    for extent, stride in zip(array.shape, array.strides):
        if stride < 0:
            start += (extent - 1) * stride
        else:
            end += (extent - 1) * stride
    return start, end + array.dtype.itemsize


def host_buffer(array: np.ndarray) -> tuple[int, int, object]:
    """The block of memory a NumPy array lies in, as ``(start, nbytes, owner)``: the memory of the array that owns its
    data, or of the buffer it was made over (a memory map, bytes, ...), found through ``.base`` and memoryviews'
    ``.obj``; ``owner`` keeps it. Where no such block is known (an object exporting an array interface only), the
    outermost array's own memory.

    Every view of one buffer lies in the same block, and two blocks never share a byte: a registration of the whole
    block serves every array over it."""
    root: object = array
    outer = array
    while True:
        if isinstance(root, np.ndarray):
            outer = root
            if root.base is None:
                break
            root = root.base
        elif isinstance(root, memoryview):
            root = root.obj
        else:
            break
    low, high = byte_bounds(array)
    if root is not outer:  # a buffer of another kind: its memory, where it says
        try:
            whole = np.frombuffer(root, np.uint8)  # type: ignore[call-overload]  # (any buffer)
        except (TypeError, ValueError, BufferError):
            whole = None
        if whole is not None and whole.size:
            start = whole.__array_interface__["data"][0]
            if start <= low and high <= start + whole.nbytes:
                return start, whole.nbytes, root
    start, end = byte_bounds(outer)
    if start <= low and high <= end:
        return start, end - start, outer
    return low, high - low, array


def pin_host(device: DeviceLike, operand: Any, nbytes: int, what: str, *, writes: bool) -> Any:
    """Page-lock the memory of a NumPy operand of a graph or captured copy (``writes``: its destination) for as long
    as the returned pin is held, or None (an Array; memory page-locked already by other means; nothing to copy).

    CUDA copies pageable memory through a staging buffer of its own at a time it chooses, not at the node's turn, so
    a copy node would read an array before the host node filling it ran; page-locked memory is copied by the node
    itself, in graph order. The whole block of memory the array lies in is page-locked (``host_buffer``). The copy's
    record holds the pin, so the memory stays locked as long as a graph or executable graph may run the copy
    (backends/_host_registry.py counts the uses).
    """
    if not isinstance(operand, np.ndarray) or not nbytes:
        return None
    start, size, owner = host_buffer(operand)
    try:
        registry = get_backend(device.backend).host_registry
        return registry.pin(operand.__array_interface__["data"][0], nbytes, owner, block=(start, size), writes=writes,
                            what=what)
    except HostRegistrationError as exc:
        raise ValueError(f"{what}: graph and captured copies page-lock a NumPy array's memory so that the copy runs "
                         f"at its turn, and the driver refused to page-lock this one ({exc}); copy the data into an "
                         f"array of dev.pinned(shape, dtype) and use that"
                         + ("" if writes else ", or page-lock it yourself with dev.register_host(array, "
                                              "read_only=True) if it is read-only memory")) from None


def host_pins(device: DeviceLike, dst: Any, src: Any, nbytes: int, box: Any, what: str) -> tuple:
    """The pins holding a copy's NumPy operands page-locked (``pin_host``): a box's operands whole, as its rows
    may lie anywhere in them."""
    pins = (pin_host(device, dst, nbytes if box is None else dst.nbytes, f"{what}(dst)", writes=True),
            pin_host(device, src, nbytes if box is None else src.nbytes, f"{what}(src)", writes=False))
    return tuple(p for p in pins if p is not None)


def memset_pattern(dst: Any, value: Any, count: Any, what: str = "memset", *,
                   node: bool = False) -> tuple[int, int, int]:
    """Turn an element value into the (pattern, element_size, count) of a 1-, 2- or 4-byte memset.

    CUDA and HIP memsets write 1-, 2- or 4-byte patterns, so an 8-byte value works only when its
    bytes repeat (0.0 does, 2.0 does not). A memset node (``node=True``) must set at least one element,
    as CUDA refuses a memset node of width 0.
    """
    if type(dst) is not Array:
        raise TypeError(f"{what}(dst): expected a device Array, got {type(dst).__name__}")
    if count is None:
        count = dst.size
    elif isinstance(count, bool) or not isinstance(count, (int, np.integer)) or not 0 <= count <= dst.size:
        raise ValueError(f"{what}: count must be an int in 0..{dst.size} (elements of dst), got {count!r}")
    if node and not count:
        raise ValueError(f"{what}: a memset node must set at least one element, got 0 (CUDA refuses a memset "
                         f"node of width 0)")
    if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, bool, np.generic)):
        raise TypeError(f"{what}: value must be a scalar, got {type(value).__name__}")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            element = np.array(value, dtype=dst.dtype)
    except (OverflowError, ValueError, TypeError):
        raise ValueError(f"{what}: value {value!r} is not representable as {dst.dtype}") from None
    # (NumPy wraps a NumPy integer that does not fit and turns a float past the type's range into inf: refused,
    # as a kernel argument's value is, where the element would not hold the value given.)
    kind = dst.dtype.kind
    finite = isinstance(value, (int, np.integer, np.bool_)) or bool(np.isfinite(value))
    if (kind in "iub" and (not finite or value != element)) or (kind == "f" and finite and not np.isfinite(element)):
        raise ValueError(f"{what}: value {value!r} is not representable as {dst.dtype}")
    raw = element.tobytes()
    for width in (1, 2, 4):
        if len(raw) % width == 0 and raw == raw[:width] * (len(raw) // width):
            return int.from_bytes(raw[:width], "little"), width, int(count) * len(raw) // width
    raise ValueError(f"{what}: memsets write 1-, 2- or 4-byte patterns; the {dst.dtype} value {value!r} "
                     f"has no such pattern (fill it with a kernel or copy it instead)")


def _dims(value: Any, name: str, what: str, *, positive: bool) -> tuple[int, ...]:
    """A box's shape or origin: an int or a tuple of 1 to 3 ints, each >= 1 (``positive``) or >= 0."""
    dims = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if (not isinstance(dims, tuple) or not 1 <= len(dims) <= 3
            or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims)):
        raise TypeError(f"{what}({name}): expected an int or a tuple of 1 to 3 ints, got {value!r}")
    least = 1 if positive else 0
    if min(dims) < least:
        raise ValueError(f"{what}({name}): each dimension must be at least {least}, got {dims}")
    return tuple(int(d) for d in dims)


def _box_side(operand: Any, shape: tuple[int, ...], at: Any, side: str, what: str,
              at_name: str) -> tuple[tuple[int, int, int], int, int]:
    """Where a box of ``shape`` elements at ``at`` lies in ``operand`` (a 1- to 3-D Array or NumPy array, its last
    axis a row): (x in bytes, y, z), the row pitch in bytes and the rows a slice."""
    dims = (1,) * (3 - len(operand.shape)) + tuple(operand.shape) if len(operand.shape) <= 3 else None
    if dims is None:
        raise ValueError(f"{what}({side}): 2-D and 3-D copies take arrays of 1 to 3 dimensions, got "
                         f"{len(operand.shape)}")
    at = (0,) * len(shape) if at is None else _dims(at, at_name, what, positive=False)
    if len(at) != len(shape):
        raise ValueError(f"{what}({at_name}): {at} has {len(at)} dimensions and shape {shape} {len(shape)}")
    box = (1,) * (3 - len(shape)) + shape
    origin = (0,) * (3 - len(at)) + at
    for axis in range(3):
        if origin[axis] + box[axis] > dims[axis]:
            raise ValueError(f"{what}({side}): a box of shape {shape} at {at} passes the end of {side} (of shape "
                             f"{tuple(operand.shape)}) along axis {axis - 3 + len(shape)}")
    itemsize = operand.dtype.itemsize
    return (origin[2] * itemsize, origin[1], origin[0]), dims[2] * itemsize, dims[1]


def copy_box(dst: Any, src: Any, nbytes: Any, shape: Any, dst_origin: Any, src_origin: Any,
             what: str) -> tuple[int, Any]:
    """Check a 2-D or 3-D copy of a box of ``shape`` elements (an int or up to 3 ints, the last along rows) from
    ``src_origin`` of ``src`` to ``dst_origin`` of ``dst``, arrays of one dtype seen as (slices, rows, row), asked
    for with ``nbytes`` None; return (the bytes it moves, its Box, or None for one row from both starts: a 1-D
    copy)."""
    from ._nodes import Box  # (the node records import this module)

    if shape is None:
        raise TypeError(f"{what}: dst_origin and src_origin place a 2-D or 3-D copy; give its shape too")
    if nbytes is not None:
        raise TypeError(f"{what}: give nbytes (a 1-D copy) or shape (a 2-D or 3-D copy), not both")
    operand_nbytes(dst, f"{what}(dst)", writable=True)
    operand_nbytes(src, f"{what}(src)")
    if dst.dtype != src.dtype:
        raise TypeError(f"{what}: dst is {dst.dtype} and src is {src.dtype}; a box copy moves elements of one dtype")
    shape = _dims(shape, "shape", what, positive=True)
    dst_at, dst_pitch, dst_rows = _box_side(dst, shape, dst_origin, "dst", what, "dst_origin")
    src_at, src_pitch, src_rows = _box_side(src, shape, src_origin, "src", what, "src_origin")
    box = (1,) * (3 - len(shape)) + shape
    extent = (box[2] * dst.dtype.itemsize, box[1], box[0])
    if extent[1:] == (1, 1) and not any(dst_at) and not any(src_at):
        return extent[0], None  # (one row from both starts: a 1-D copy, as CUDA reads it back)
    return extent[0] * extent[1] * extent[2], Box(extent, dst_at, dst_pitch, dst_rows, src_at, src_pitch, src_rows)


def memset_plane(dst: Any, value: Any, count: Any, shape: Any, origin: Any,
                 what: str) -> tuple[int, int, int, int, int, int]:
    """Check a 2-D memset of a box of ``shape`` elements (rows, row) at ``origin`` of ``dst``, a 1- or 2-D Array,
    asked for with ``count`` None: (pattern, element size, elements a row, pitch in bytes, rows, offset in bytes)."""
    if shape is None:
        raise TypeError(f"{what}: origin places a 2-D memset; give its shape too")
    if count is not None:
        raise TypeError(f"{what}: give count (a 1-D memset) or shape (a 2-D memset), not both")
    pattern, element_size, _ = memset_pattern(dst, value, None, what)
    # The widest pattern the dtype allows, so a 2-D memset's element size follows its dtype, not its value: an
    # executable graph's 2-D memset may take a new value but not a new element size (CUDA's rule).
    for width in (4, 2):
        if width > element_size and dst.dtype.itemsize % width == 0:
            pattern = int.from_bytes(pattern.to_bytes(element_size, "little") * (width // element_size), "little")
            element_size = width
            break
    if len(dst.shape) > 2:
        raise ValueError(f"{what}(dst): memsets are 2-D; dst has {len(dst.shape)} dimensions (set each slice)")
    shape = _dims(shape, "shape", what, positive=True)
    if len(shape) > 2:
        raise ValueError(f"{what}(shape): memsets are 2-D, got {shape}")
    (x, y, _), pitch, _ = _box_side(dst, shape, origin, "dst", what, "origin")
    units = dst.dtype.itemsize // element_size  # (pattern elements per element of dst)
    rows, row = (1,) * (2 - len(shape)) + shape
    return pattern, element_size, row * units, pitch, rows, y * pitch + x


def address_of(operand: Any) -> int:
    """Where a memory operand starts: an Array's address, a NumPy array's, or a raw address (an int)."""
    if type(operand) is Array:
        return operand.ptr
    if isinstance(operand, np.ndarray):
        return operand.__array_interface__["data"][0]
    return int(operand)
