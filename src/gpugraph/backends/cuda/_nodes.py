"""Graph nodes on CUDA: gpugraph's parameter records to driver nodes, and driver nodes back to records."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ... import _params
from ..._memory import Array
from ..._nodes import (
    AllocParams,
    ChildGraphParams,
    EmptyParams,
    EventRecordParams,
    EventWaitParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
)
from ..._params import Param, resolve
from ._driver import call, error
from ._objects import CudaGraph, ForeignKernel

_T = cu.CUgraphNodeType
_MEMORY = cu.CUmemorytype


def address(operand: Any) -> int:
    """The address of a memory operand: an Array, a NumPy array or a raw int."""
    if type(operand) is Array:
        return operand.ptr
    if isinstance(operand, np.ndarray):
        return operand.__array_interface__["data"][0]
    return int(operand)


def memcpy3d(dst: Any, src: Any, nbytes: int) -> Any:
    """A 1-D copy as CUDA_MEMCPY3D, with host or device memory types from the operands."""
    p = cu.CUDA_MEMCPY3D()
    if isinstance(src, np.ndarray):
        p.srcMemoryType, p.srcHost = _MEMORY.CU_MEMORYTYPE_HOST, address(src)
    else:
        p.srcMemoryType, p.srcDevice = _MEMORY.CU_MEMORYTYPE_DEVICE, address(src)
    if isinstance(dst, np.ndarray):
        p.dstMemoryType, p.dstHost = _MEMORY.CU_MEMORYTYPE_HOST, address(dst)
    else:
        p.dstMemoryType, p.dstDevice = _MEMORY.CU_MEMORYTYPE_DEVICE, address(dst)
    p.WidthInBytes, p.Height, p.Depth = nbytes, 1, 1
    return p


def memset_params(dst: Any, pattern: int, element_size: int, count: int) -> Any:
    p = cu.CUDA_MEMSET_NODE_PARAMS()
    p.dst, p.value, p.elementSize, p.width, p.height, p.pitch = address(dst), pattern, element_size, count, 1, 0
    return p


def _resolved(args: tuple) -> tuple:
    """Arguments with each Param replaced by its value now."""
    return tuple([resolve(a) for a in args]) if _params.in_use else args


def add_node(backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
    """Add the driver node for ``params`` after ``deps`` (the HIP twins are hipGraphAdd*Node)."""
    g, n, ctx = graph.handle, len(deps), backend.contexts.get(graph.index)
    if type(params) is KernelParams:
        function = backend.function(graph.index, params.kernel)
        with function.lock:
            p = function.node_params(params.grid, params.block, params.shared_mem, _resolved(params.args))
            # (Kept, then returned after the block: an interrupt as the call returns then lands inside the
            # block, which releases the lock; one after the return value is taken could skip the release.)
            node = call(cu.cuGraphAddKernelNode, g, deps, n, p)
        return node
    if isinstance(params, MemcpyParams):
        return call(cu.cuGraphAddMemcpyNode, g, deps, n, memcpy3d(params.dst, params.src, params.nbytes), ctx)
    if isinstance(params, MemsetParams):
        p = memset_params(params.dst, params.pattern, params.element_size, params.count)
        return call(cu.cuGraphAddMemsetNode, g, deps, n, p, ctx)
    if isinstance(params, HostParams):
        key = backend.host.register(params.fn, params.args, None, False)
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = backend.host.fn, key
        node = call(cu.cuGraphAddHostNode, g, deps, n, p)
        graph.host_keys[node] = key
        backend.host.own_by_graph(key, g)
        return node
    if isinstance(params, EmptyParams):
        return call(cu.cuGraphAddEmptyNode, g, deps, n)
    if isinstance(params, ChildGraphParams):
        return call(cu.cuGraphAddChildGraphNode, g, deps, n, params.graph.handle)
    if isinstance(params, EventRecordParams):
        return call(cu.cuGraphAddEventRecordNode, g, deps, n, params.event._handle.handle)
    if isinstance(params, EventWaitParams):
        return call(cu.cuGraphAddEventWaitNode, g, deps, n, params.event._handle.handle)
    if isinstance(params, FreeParams):
        return call(cu.cuGraphAddMemFreeNode, g, deps, n, cu.CUdeviceptr(params.ptr))
    raise TypeError(f"cuda: no node for parameters of type {type(params).__name__}")


def set_exec_node(backend: Any, exec_: Any, node: Any, params: Any) -> None:
    """Change one node of an executable graph (the HIP twins are hipGraphExec*NodeSetParams)."""
    e = exec_.handle
    if type(params) is KernelParams:
        function = backend.function(exec_.index, params.kernel)
        with function.lock:
            p = function.node_params(params.grid, params.block, params.shared_mem, _resolved(params.args))
            call(cu.cuGraphExecKernelNodeSetParams, e, node, p)
        return
    ctx = backend.contexts.get(exec_.index)
    if isinstance(params, MemcpyParams):
        call(cu.cuGraphExecMemcpyNodeSetParams, e, node, memcpy3d(params.dst, params.src, params.nbytes), ctx)
    elif isinstance(params, MemsetParams):
        p = memset_params(params.dst, params.pattern, params.element_size, params.count)
        call(cu.cuGraphExecMemsetNodeSetParams, e, node, p, ctx)
    elif isinstance(params, HostParams):
        key = backend.host.register(params.fn, params.args, exec_.host_stream, False)
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = backend.host.fn, key
        call(cu.cuGraphExecHostNodeSetParams, e, node, p)
        replaced = exec_.own_keys.pop(node, None)  # the executable graph's own callables, one per node
        if replaced is not None:
            backend.host.forget(replaced)
            exec_.host_keys.remove(replaced)
        exec_.own_keys[node] = key
        exec_.host_keys.append(key)
    elif isinstance(params, ChildGraphParams):
        call(cu.cuGraphExecChildGraphNodeSetParams, e, node, params.graph.handle)
        keys: list[int] = []
        backend._host_keys(params.graph, keys)  # its host nodes' errors go to the launch's stream
        exec_.host_keys.extend(keys)
        exec_.host_stream = None
    elif isinstance(params, EventRecordParams):
        call(cu.cuGraphExecEventRecordNodeSetEvent, e, node, params.event._handle.handle)
    elif isinstance(params, EventWaitParams):
        call(cu.cuGraphExecEventWaitNodeSetEvent, e, node, params.event._handle.handle)
    else:
        raise TypeError(f"cuda: nodes with parameters of type {type(params).__name__} cannot be changed")


def param_patcher(backend: Any, exec_: Any, node: Any, params: Any) -> Any:
    """A prepared patch of a kernel node whose arguments include Params: its own CUDA_KERNEL_NODE_PARAMS
    and argument buffer, of which a patch rewrites only the Param slots before setting the node."""
    if not isinstance(params, KernelParams) or params.kernel.signature is None:
        return lambda: set_exec_node(backend, exec_, node, params)
    function = backend.function(exec_.index, params.kernel)
    prepared = function.new_node_params(params.grid, params.block, params.shared_mem)
    with function.lock:  # the slots' formats are read from the layout this pack made, before another can
        function.pack(tuple([resolve(a) for a in params.args]))
        buffer, pointers = function.copy_arguments()  # this node's own copy of the packed arguments
        slots = [(function.slot_format(i), function.slot_offset(i), arg)
                 for i, arg in enumerate(params.args) if type(arg) is Param]
    prepared.kernelParams = ctypes.addressof(pointers)
    exec_handle, set_params = exec_.handle, cu.cuGraphExecKernelNodeSetParams
    keep = (buffer, pointers)  # the driver reads them at each patch
    contexts, index = backend.contexts, exec_.index
    context, current = contexts.get(index), contexts.current

    def patch() -> None:
        for fmt, offset, param in slots:
            value = param._value
            fmt.pack_into(buffer, offset, value.ptr if type(value) is Array else value)
        if current() is not context:
            # First: from a thread with no current context the driver crashes here (a NULL dereference in
            # cuGraphExecKernelNodeSetParams, driver 580 on the H200: tools/gpu_probe_threads.py, C) rather
            # than answering CUDA_ERROR_INVALID_CONTEXT; a new thread's first call may be this patch.
            contexts.use(index)
        (err,) = set_params(exec_handle, node, prepared)
        if err:
            raise error("cuGraphExecKernelNodeSetParams", err)
    patch.keep = keep  # type: ignore[attr-defined]
    return patch


def derive_params(backend: Any, graph: CudaGraph, node: Any) -> Any:
    """A parameter record read back from the driver, for nodes gpugraph did not record itself."""
    kind = call(cu.cuGraphNodeGetType, node)
    if kind == _T.CU_GRAPH_NODE_TYPE_KERNEL:
        p = call(cu.cuGraphKernelNodeGetParams, node)
        kernel = backend.kernel_of(p.func) or ForeignKernel(_function_name(p.func))
        return KernelParams(kernel, (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ),
                            p.sharedMemBytes, ())
    if kind == _T.CU_GRAPH_NODE_TYPE_MEMCPY:
        p = call(cu.cuGraphMemcpyNodeGetParams, node)
        host = _MEMORY.CU_MEMORYTYPE_HOST
        dst = int(p.dstHost) if p.dstMemoryType == host else int(p.dstDevice)
        src = int(p.srcHost) if p.srcMemoryType == host else int(p.srcDevice)
        return MemcpyParams(dst, src, p.WidthInBytes * max(p.Height, 1) * max(p.Depth, 1))
    if kind == _T.CU_GRAPH_NODE_TYPE_MEMSET:
        p = call(cu.cuGraphMemsetNodeGetParams, node)
        return MemsetParams(int(p.dst), int(p.value), int(p.value), p.elementSize, p.width * max(p.height, 1))
    if kind == _T.CU_GRAPH_NODE_TYPE_HOST:
        p = call(cu.cuGraphHostNodeGetParams, node)
        return HostParams(backend.host.callable(int(p.userData or 0)), ())
    if kind == _T.CU_GRAPH_NODE_TYPE_GRAPH:
        return ChildGraphParams(CudaGraph(call(cu.cuGraphChildGraphNodeGetGraph, node), graph.index))
    if kind == _T.CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return EventRecordParams(call(cu.cuGraphEventRecordNodeGetEvent, node))
    if kind == _T.CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return EventWaitParams(call(cu.cuGraphEventWaitNodeGetEvent, node))
    if kind == _T.CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        p = call(cu.cuGraphMemAllocNodeGetParams, node)
        return AllocParams(int(p.bytesize), int(p.dptr))
    if kind == _T.CU_GRAPH_NODE_TYPE_MEM_FREE:
        return FreeParams(int(call(cu.cuGraphMemFreeNodeGetParams, node)))
    return EmptyParams()


def _function_name(func: Any) -> str:
    name = call(cu.cuFuncGetName, func)
    return name.decode() if isinstance(name, bytes) else str(name)
