"""The driver's parameter structs of CUDA graph nodes and edges: copies, memsets, semaphores and memory operations made
from gpugraph's records, the arrays of a read-back struct that cuda-bindings does not expose, read from its memory,
and the data of an edge of each kind."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ..._errors import GraphError
from ..._memops import bits
from ..._memory import Array
from ..._memory import address_of as address
from ..._nodes import DEPENDENCY_KINDS, MemsetParams, SemaphoreSignalParams, WaitValue, WriteValue
from ..._semaphores import semaphore_handle

_MEMORY = cu.CUmemorytype


def device_index(operand: Any, default: int) -> int:
    """The index of the device whose memory ``operand`` is (an Array's), else ``default``."""
    return operand.device.index if type(operand) is Array else default


def _device_memory_type(operand: Any, index: int) -> Any:
    # Memory of another device than the node's context is named by its unified address: the driver finds its
    # device (a copy between devices, as cudaMemcpyDefault makes one).
    return _MEMORY.CU_MEMORYTYPE_DEVICE if device_index(operand, index) == index else _MEMORY.CU_MEMORYTYPE_UNIFIED


def memcpy3d(dst: Any, src: Any, nbytes: int, index: int, box: Any = None) -> Any:
    """A copy as CUDA_MEMCPY3D, run in device ``index``'s context, with memory types from the operands: ``nbytes``
    from their starts, or the ``Box`` ``box`` of them."""
    p = cu.CUDA_MEMCPY3D()
    if box is not None:
        (p.WidthInBytes, p.Height, p.Depth), (p.dstXInBytes, p.dstY, p.dstZ) = box.extent, box.dst_at
        p.dstPitch, p.dstHeight, (p.srcXInBytes, p.srcY, p.srcZ) = box.dst_pitch, box.dst_rows, box.src_at
        p.srcPitch, p.srcHeight = box.src_pitch, box.src_rows
    if isinstance(src, np.ndarray):
        p.srcMemoryType, p.srcHost = _MEMORY.CU_MEMORYTYPE_HOST, address(src)
    else:
        p.srcMemoryType, p.srcDevice = _device_memory_type(src, index), address(src)
    if isinstance(dst, np.ndarray):
        p.dstMemoryType, p.dstHost = _MEMORY.CU_MEMORYTYPE_HOST, address(dst)
    else:
        p.dstMemoryType, p.dstDevice = _device_memory_type(dst, index), address(dst)
    if box is None:
        p.WidthInBytes, p.Height, p.Depth = nbytes, 1, 1
    return p


def memset_params(params: MemsetParams) -> Any:
    p = cu.CUDA_MEMSET_NODE_PARAMS()
    p.dst, p.value, p.elementSize = address(params.dst) + params.offset, params.pattern, params.element_size
    p.width, p.height, p.pitch = params.count, params.height, params.pitch
    return p


def semaphore_arrays(params: Any) -> tuple[list[Any], list[Any]]:
    """A semaphore signal or wait record's semaphores and their parameter structs, as the driver's calls take them."""
    signal = isinstance(params, SemaphoreSignalParams)
    items = []
    for value in params.values:
        item = cu.CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS() if signal else cu.CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS()
        item.params.fence.value = value  # (a binary semaphore's: 0, which the driver ignores)
        items.append(item)
    return [semaphore_handle(semaphore).handle for semaphore in params.semaphores], items


# CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and ..._WAIT_PARAMS are 144 bytes each, their fence value first (cuda.h); a
# node's parameters read back hold a pointer to the semaphores, one to these, and their count (cuda-bindings gives
# the arrays of a read-back struct as empty lists, so they are read from the struct's memory).
_SEMAPHORE_PARAMS_SIZE = 144


def read_semaphores(p: Any) -> tuple[list[int], list[int]]:
    semaphores_at, params_at, count = (ctypes.c_uint64 * 3).from_address(p.getPtr())
    count &= 0xFFFFFFFF
    handles = list((ctypes.c_uint64 * count).from_address(semaphores_at)) if count else []
    values = [ctypes.c_uint64.from_address(params_at + k * _SEMAPHORE_PARAMS_SIZE).value for k in range(count)]
    return handles, values


# CUDA_MEM_ALLOC_NODE_PARAMS: the access descriptors' address and count follow the 88 bytes of CUmemPoolProps;
# a CUmemAccessDesc is 12 bytes: location type, location id, flags (cuda.h; read from memory as above).
_ACCESS_AT, _ACCESS_SIZE = 88, 12


def read_access(p: Any, own: int) -> tuple[int, ...]:
    """The other devices an allocation node's access descriptors name."""
    at, count = (ctypes.c_uint64 * 2).from_address(p.getPtr() + _ACCESS_AT)
    ids = {ctypes.c_int32.from_address(at + k * _ACCESS_SIZE + 4).value for k in range(count)} if at else set()
    return tuple(sorted(ids - {own}))


_OP = cu.CUstreamBatchMemOpType
_WAIT_FLAGS = {"geq": cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ,
               "eq": cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ,
               "and": cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_AND,
               "nor": cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_NOR}
_CONDITIONS = {int(flag): name for name, flag in _WAIT_FLAGS.items()}
_WAITS = {32: _OP.CU_STREAM_MEM_OP_WAIT_VALUE_32, 64: _OP.CU_STREAM_MEM_OP_WAIT_VALUE_64}
_WRITES = {32: _OP.CU_STREAM_MEM_OP_WRITE_VALUE_32, 64: _OP.CU_STREAM_MEM_OP_WRITE_VALUE_64}


def wait_flags(condition: str) -> Any:
    """The CUstreamWaitValue_flags of a wait operation's condition."""
    return _WAIT_FLAGS[condition]


def mem_op(op: Any) -> Any:
    """One operation as CUstreamBatchMemOpParams."""
    at, width, value = bits(op)
    p = cu.CUstreamBatchMemOpParams()
    if isinstance(op, WaitValue):
        p.operation = p.waitValue.operation = _WAITS[width]
        p.waitValue.address, p.waitValue.flags = at, _WAIT_FLAGS[op.condition]
        item = p.waitValue
    else:
        p.operation = p.writeValue.operation = _WRITES[width]
        p.writeValue.address, p.writeValue.flags = at, 0
        item = p.writeValue
    if width == 64:
        item.value64 = value
    else:
        item.value = value
    return p


# CUstreamBatchMemOpParams is a 48-byte union: the operation (4 bytes) first, the address at 8, the value at 16 and
# the flags at 24 (cuda.h). A node's parameters read back hold the context, the count and a pointer to them (as for
# semaphore nodes, cuda-bindings gives that array as an empty list).
_MEM_OP_SIZE = 48


def read_mem_ops(p: Any) -> tuple:
    _, count, at = (ctypes.c_uint64 * 3).from_address(p.getPtr())
    ops: list[Any] = []
    for k in range(count & 0xFFFFFFFF):
        base = at + k * _MEM_OP_SIZE
        operation = ctypes.c_uint32.from_address(base).value
        address = ctypes.c_uint64.from_address(base + 8).value
        wide = operation in (int(_WAITS[64]), int(_WRITES[64]))
        value = (ctypes.c_uint64 if wide else ctypes.c_uint32).from_address(base + 16).value
        if operation in (int(_WAITS[32]), int(_WAITS[64])):
            ops.append(WaitValue(address, value, _CONDITIONS.get(ctypes.c_uint32.from_address(base + 24).value, "?")))
        else:
            ops.append(WriteValue(address, value))
    return tuple(ops)


# The source kernel's port of each edge kind but "full" (CUgraphEdgeData.from_port; its type is programmatic).
_PORTS = {"programmatic": cu.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
          "launch_order": cu.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER}
_KINDS = {int(port): kind for kind, port in _PORTS.items()}


def kind_of(edge: Any) -> str:
    """The kind of an edge from its CUgraphEdgeData; a pairing gpugraph does not make (another library's: a
    launch-completion port, say) is named in an error rather than read as another kind."""
    kind_type, port = int(edge.type), int(edge.from_port)
    if not kind_type and not port:
        return "full"
    if kind_type == int(cu.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) and port in _KINDS:
        return _KINDS[port]
    raise GraphError(f"an edge of the CUDA graph has data gpugraph does not name (type {kind_type}, port {port}); "
                     f"the kinds are {', '.join(DEPENDENCY_KINDS)}")


def edge_data(kind: str) -> Any:
    """The CUgraphEdgeData of an edge of ``kind`` (one of DEPENDENCY_KINDS)."""
    edge = cu.CUgraphEdgeData()
    if kind != "full":
        edge.from_port, edge.type = _PORTS[kind], cu.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    return edge
