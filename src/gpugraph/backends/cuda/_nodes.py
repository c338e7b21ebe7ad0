"""Graph nodes on CUDA: gpugraph's parameter records to driver nodes, and driver nodes back to records.

One class per node kind keeps that kind's add, exec-set, read-back and pairing test together; two maps
find the kind of a parameter record and of a driver node type.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from cuda.bindings import driver as cu

from ... import _params
from ..._attributes import AttributeRefusal, launch_refusal
from ..._conditions import condition_handle
from ..._event import event_handle
from ..._exec_state import KernelPatch
from ..._memops import bits
from ..._memory import address_of as address
from ..._nodes import (
    AllocParams,
    Box,
    ChildGraphParams,
    ConditionalParams,
    EmptyParams,
    EventRecordParams,
    EventWaitParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemOpsParams,
    MemsetParams,
    SemaphoreSignalParams,
    SemaphoreWaitParams,
)
from ..._params import Param, resolve
from ..._semaphores import semaphore_handle
from ._attributes import read_attributes
from ._driver import call, error, fail, require_driver
from ._objects import CudaGraph, ForeignKernel
from ._structs import (
    device_index,
    mem_op,
    memcpy3d,
    memset_params,
    read_access,
    read_mem_ops,
    read_semaphores,
    semaphore_arrays,
)
from ._symbols import drv

_T = cu.CUgraphNodeType
_MEMORY = cu.CUmemorytype
_add_kernel_node = drv.graph_add_kernel_node  # read once, for the hot path (each read of drv looks it up)
# The driver's refusals of an executable graph's kernel node shape that its attributes do not allow (the rules of
# _attributes.launch_refusal; the front end checks a graph's nodes before the driver sees them).
_SHAPE_REFUSALS = {cu.CUresult.CUDA_ERROR_INVALID_CLUSTER_SIZE: "its cluster dims must divide its grid",
                   cu.CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
                       "it is cooperative, so its blocks must all be resident at once, more than this device holds"}


def _shape_refusal(node: cu.CUgraphNode, params: KernelParams, err: cu.CUresult,
                   cooperative_blocks: Callable[[], int]) -> str:
    """Why the driver refused kernel node ``node`` of an executable graph the launch shape of ``params`` (``err``, one
    of _SHAPE_REFUSALS): the rule with the node's numbers, as the front end words it (launch_refusal), from the
    attributes of the graph's node, which the executable graph was made with unless they changed since; else
    the rule alone. ``cooperative_blocks``: the most blocks of the node's shape the device holds at once."""
    refusal = launch_refusal(read_attributes(node), params.grid, params.block, cooperative_blocks)
    rule = _SHAPE_REFUSALS[err]
    # (The same rule where both begin alike: "its cluster dims...", "it is cooperative...".)
    return refusal if refusal is not None and refusal[:12] == rule[:12] else f"{rule} ({err.name})"


def _resolved(args: tuple) -> tuple:
    """Arguments with each Param replaced by its value now."""
    return tuple([resolve(a) for a in args]) if _params.in_use else args


# The node kinds


class _Kind:
    """A node kind: how its parameter record becomes a driver node (``add``), changes a node of a graph
    (``set_graph``) or of an executable graph (``set_exec``) and is read back from a driver node (``read``), and
    whether a record that a captured call queued describes a node read back (``describes``: see _capture's
    pairing). This base is the kind of anything else: no node is made or changed from it, and a driver node of it
    reads back as an empty node."""

    record: ClassVar[type | None] = None  # its parameter record (gpugraph._nodes)
    node_type: ClassVar[Any] = None  # its CUgraphNodeType

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        raise TypeError(f"cuda: no node for parameters of type {type(params).__name__}")

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        raise TypeError(f"cuda: nodes with parameters of type {type(params).__name__} cannot be changed")

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        raise TypeError(f"cuda: nodes with parameters of type {type(params).__name__} cannot be changed")

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        return EmptyParams()

    def describes(self, record: Any, derived: Any) -> bool:
        """(Given a record and a read-back record of this kind.)"""
        return record == derived  # (free nodes: their addresses)


class _Kernel(_Kind):
    record = KernelParams
    node_type = _T.CU_GRAPH_NODE_TYPE_KERNEL

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        function = backend.function(params.device, params.kernel)  # (loaded in its device's context: it runs there)
        with function.lock:
            p = function.node_params(params.grid, params.block, params.shared_mem, _resolved(params.args))
            # (Kept, then returned after the block: an interrupt as the call returns then lands inside the
            # block, which releases the lock; one after the return value is taken could skip the release.)
            node = call(_add_kernel_node, graph.handle, deps, len(deps), p)
        return node

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        function = backend.function(params.device, params.kernel)
        with function.lock:
            p = function.node_params(params.grid, params.block, params.shared_mem, _resolved(params.args))
            call(drv.graph_kernel_node_set_params, node, p)

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        function = backend.function(params.device, params.kernel)
        with function.lock:
            p = function.node_params(params.grid, params.block, params.shared_mem, _resolved(params.args))
            err = drv.graph_exec_kernel_node_set_params(exec_.handle, node, p)[0]
        if err in _SHAPE_REFUSALS:  # (the node's attributes, which the exec keeps out of gpugraph's sight)
            block = params.block
            raise AttributeRefusal(_shape_refusal(node, params, err, lambda: backend.kernel_cooperative_blocks(
                params.device, params.kernel, block[0] * block[1] * block[2], params.shared_mem)))
        if err:
            raise error("cuGraphExecKernelNodeSetParams", err)

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        p = call(drv.graph_kernel_node_get_params, node)
        kernel, index = backend.kernel_of(p.func)
        if kernel is None:
            kernel, index = ForeignKernel(_function_name(p.func)), backend.context_device(p.ctx, graph.index)
        return KernelParams(kernel, (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ),
                            p.sharedMemBytes, (), index)

    def describes(self, record: Any, derived: Any) -> bool:
        return (record.kernel is derived.kernel and record.grid == derived.grid and record.block == derived.block
                and record.device == derived.device)


class _Memcpy(_Kind):
    record = MemcpyParams
    node_type = _T.CU_GRAPH_NODE_TYPE_MEMCPY

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        ctx = backend.contexts.get(graph.index)
        p = memcpy3d(params.dst, params.src, params.nbytes, graph.index, params.box)
        return call(drv.graph_add_memcpy_node, graph.handle, deps, len(deps), p, ctx)

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        call(drv.graph_memcpy_node_set_params, node,
             memcpy3d(params.dst, params.src, params.nbytes, graph.index, params.box))

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        ctx = backend.contexts.get(exec_.index)
        p = memcpy3d(params.dst, params.src, params.nbytes, exec_.index, params.box)
        call(drv.graph_exec_memcpy_node_set_params, exec_.handle, node, p, ctx)

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        p = call(drv.graph_memcpy_node_get_params, node)
        host = _MEMORY.CU_MEMORYTYPE_HOST
        dst = int(p.dstHost) if p.dstMemoryType == host else int(p.dstDevice)
        src = int(p.srcHost) if p.srcMemoryType == host else int(p.srcDevice)
        extent = (p.WidthInBytes, max(p.Height, 1), max(p.Depth, 1))
        box = None
        if extent[1:] != (1, 1) or any((p.dstXInBytes, p.dstY, p.dstZ, p.srcXInBytes, p.srcY, p.srcZ)):
            box = Box(extent, (p.dstXInBytes, p.dstY, p.dstZ), p.dstPitch, p.dstHeight, (p.srcXInBytes, p.srcY, p.srcZ),
                      p.srcPitch, p.srcHeight)
        return MemcpyParams(dst, src, extent[0] * extent[1] * extent[2], box)

    def describes(self, record: Any, derived: Any) -> bool:
        return (address(record.dst), address(record.src), record.nbytes) == (derived.dst, derived.src,
                                                                             derived.nbytes)


class _Memset(_Kind):
    record = MemsetParams
    node_type = _T.CU_GRAPH_NODE_TYPE_MEMSET

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        ctx = backend.contexts.get(device_index(params.dst, graph.index))  # (it runs on dst's device)
        return call(drv.graph_add_memset_node, graph.handle, deps, len(deps), memset_params(params), ctx)

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        call(drv.graph_memset_node_set_params, node, memset_params(params))

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        ctx = backend.contexts.get(device_index(params.dst, exec_.index))
        call(drv.graph_exec_memset_node_set_params, exec_.handle, node, memset_params(params), ctx)

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        p = call(drv.graph_memset_node_get_params, node)
        if p.height > 1:
            return MemsetParams(int(p.dst), int(p.value), int(p.value), p.elementSize, p.width, p.pitch, p.height)
        return MemsetParams(int(p.dst), int(p.value), int(p.value), p.elementSize, p.width)

    def describes(self, record: Any, derived: Any) -> bool:
        return (address(record.dst) + record.offset, record.count, record.height) == (derived.dst, derived.count,
                                                                                       derived.height)


class _Host(_Kind):
    record = HostParams
    node_type = _T.CU_GRAPH_NODE_TYPE_HOST

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        key = backend.host.register(params.fn, params.args, None, False)
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = backend.host.fn, key
        node = call(drv.graph_add_host_node, graph.handle, deps, len(deps), p)
        graph.host_keys[node] = key
        backend.host.own_by_graph(key, graph.handle)
        return node

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        key = backend.host.register(params.fn, params.args, None, False)
        # (The key it replaces stays, owned by the graph: executable graphs made earlier call it.)
        backend.host.own_by_graph(key, graph.handle)
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = backend.host.fn, key
        call(drv.graph_host_node_set_params, node, p)
        graph.host_keys[node] = key

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        key = backend.host.register(params.fn, params.args, exec_.host_stream, False)
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = backend.host.fn, key
        call(drv.graph_exec_host_node_set_params, exec_.handle, node, p)
        replaced = exec_.own_keys.pop(node, None)  # the executable graph's own callables, one per node
        if replaced is not None:
            backend.host.forget(replaced)
            exec_.host_keys.remove(replaced)
        exec_.own_keys[node] = key
        exec_.host_keys.append(key)

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        p = call(drv.graph_host_node_get_params, node)
        return HostParams(backend.host.callable(int(p.userData or 0)), ())


class _Empty(_Kind):
    record = EmptyParams
    node_type = _T.CU_GRAPH_NODE_TYPE_EMPTY

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(drv.graph_add_empty_node, graph.handle, deps, len(deps))


class _ChildGraph(_Kind):
    record = ChildGraphParams
    node_type = _T.CU_GRAPH_NODE_TYPE_GRAPH

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(drv.graph_add_child_graph_node, graph.handle, deps, len(deps), params.graph.handle)

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        require_driver(12020, "a child-graph node's graph, set (Graph.set_child_graph)", "cuGraphNodeSetParams")
        p = cu.CUgraphNodeParams()
        p.type = self.node_type
        p.graph.graph = params.graph.handle
        call(drv.graph_node_set_params, node, p)
        # The node embeds a new copy (measured on the H200, driver 580): kept with its records, as an add keeps it.
        graph.children[node] = backend.embedded_copy(params.graph, call(drv.graph_child_graph_node_get_graph, node))

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        call(drv.graph_exec_child_graph_node_set_params, exec_.handle, node, params.graph.handle)
        keys: list[int] = []
        backend.collect_host_keys(params.graph, keys)  # its host nodes' errors go to the launch's stream
        exec_.host_keys.extend(keys)
        exec_.host_stream = None

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        return ChildGraphParams(CudaGraph(call(drv.graph_child_graph_node_get_graph, node), graph.index))


class _Event(_Kind):
    """An event-record or event-wait node: both take one event, through the driver calls named below."""

    record: ClassVar[type]
    adds: ClassVar[str]  # the symbol table's names of the kind's add, graph-set, exec-set and read-back calls
    graph_sets: ClassVar[str]
    sets: ClassVar[str]
    gets: ClassVar[str]

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(getattr(drv, self.adds), graph.handle, deps, len(deps), event_handle(params.event).handle)

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        call(getattr(drv, self.graph_sets), node, event_handle(params.event).handle)

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        call(getattr(drv, self.sets), exec_.handle, node, event_handle(params.event).handle)

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        return self.record(call(getattr(drv, self.gets), node))


class _EventRecord(_Event):
    record = EventRecordParams
    node_type = _T.CU_GRAPH_NODE_TYPE_EVENT_RECORD
    adds, sets = "graph_add_event_record_node", "graph_exec_event_record_node_set_event"
    graph_sets = "graph_event_record_node_set_event"
    gets = "graph_event_record_node_get_event"


class _EventWait(_Event):
    record = EventWaitParams
    node_type = _T.CU_GRAPH_NODE_TYPE_WAIT_EVENT
    adds, sets = "graph_add_event_wait_node", "graph_exec_event_wait_node_set_event"
    graph_sets = "graph_event_wait_node_set_event"
    gets = "graph_event_wait_node_get_event"


class _Semaphores(_Kind):
    """An external semaphore signal or wait node: both take semaphores and values, through the calls named below."""

    record: ClassVar[type]
    struct: ClassVar[Any]  # the node's parameter struct
    adds: ClassVar[str]  # the symbol table's names of the kind's add, graph-set, exec-set and read-back calls
    graph_sets: ClassVar[str]
    sets: ClassVar[str]
    gets: ClassVar[str]

    def _params(self, params: Any) -> Any:
        p = self.struct()
        p.extSemArray, p.paramsArray = semaphore_arrays(params)
        p.numExtSems = len(params.values)
        return p

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(getattr(drv, self.adds), graph.handle, deps, len(deps), self._params(params))

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        call(getattr(drv, self.graph_sets), node, self._params(params))

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        call(getattr(drv, self.sets), exec_.handle, node, self._params(params))

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        # (The driver's semaphore handles, as ints: which ExternalSemaphore each is, the front end's record says.)
        handles, values = read_semaphores(call(getattr(drv, self.gets), node))
        return self.record(tuple(handles), tuple(values))

    def describes(self, record: Any, derived: Any) -> bool:
        return record.values == derived.values and [int(semaphore_handle(s).handle) for s in record.semaphores] == list(
            derived.semaphores)


class _SemaphoreSignal(_Semaphores):
    record = SemaphoreSignalParams
    node_type = _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL
    struct = cu.CUDA_EXT_SEM_SIGNAL_NODE_PARAMS
    adds, sets = "graph_add_external_semaphores_signal_node", "graph_exec_external_semaphores_signal_node_set_params"
    graph_sets = "graph_external_semaphores_signal_node_set_params"
    gets = "graph_external_semaphores_signal_node_get_params"


class _SemaphoreWait(_Semaphores):
    record = SemaphoreWaitParams
    node_type = _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT
    struct = cu.CUDA_EXT_SEM_WAIT_NODE_PARAMS
    adds, sets = "graph_add_external_semaphores_wait_node", "graph_exec_external_semaphores_wait_node_set_params"
    graph_sets = "graph_external_semaphores_wait_node_set_params"
    gets = "graph_external_semaphores_wait_node_get_params"


class _MemOps(_Kind):
    """A batch memory-op node (CUDA 11.7; HIP marks its twin beta)."""

    record = MemOpsParams
    node_type = _T.CU_GRAPH_NODE_TYPE_BATCH_MEM_OP

    @staticmethod
    def _params(backend: Any, index: int, params: Any) -> Any:
        p = cu.CUDA_BATCH_MEM_OP_NODE_PARAMS()
        p.ctx, p.count, p.flags = backend.contexts.get(index), len(params.ops), 0
        p.paramArray = [mem_op(op) for op in params.ops]
        return p

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(drv.graph_add_batch_mem_op_node, graph.handle, deps, len(deps),
                    self._params(backend, graph.index, params))

    def set_graph(self, backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
        call(drv.graph_batch_mem_op_node_set_params, node, self._params(backend, graph.index, params))

    def set_exec(self, backend: Any, exec_: Any, node: Any, params: Any) -> None:
        call(drv.graph_exec_batch_mem_op_node_set_params, exec_.handle, node,
             self._params(backend, exec_.index, params))

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        # (Raw addresses as targets: which Array each is, the front end's record says.)
        return MemOpsParams(read_mem_ops(call(drv.graph_batch_mem_op_node_get_params, node)))

    def describes(self, record: Any, derived: Any) -> bool:
        if len(record.ops) != len(derived.ops):
            return False
        for op, read in zip(record.ops, derived.ops):
            at, _, value = bits(op)
            if (type(op), at, value, getattr(op, "condition", None)) != (
                    type(read), read.target, read.value, getattr(read, "condition", None)):
                return False
        return True


class _Alloc(_Kind):
    """(Added by the backend's graph_add_alloc, which keeps the address the driver gives it.)"""

    record = AllocParams
    node_type = _T.CU_GRAPH_NODE_TYPE_MEM_ALLOC

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        p = call(drv.graph_mem_alloc_node_get_params, node)
        index = int(p.poolProps.location.id)
        return AllocParams(int(p.bytesize), int(p.dptr), index, read_access(p, index))

    def describes(self, record: Any, derived: Any) -> bool:
        # (not the size: the driver reports a 0-byte allocation's as the 1 it allocated)
        return (record.ptr, record.device, record.access) == (derived.ptr, derived.device, derived.access)


class _Free(_Kind):
    record = FreeParams
    node_type = _T.CU_GRAPH_NODE_TYPE_MEM_FREE

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        return call(drv.graph_add_mem_free_node, graph.handle, deps, len(deps), cu.CUdeviceptr(params.ptr))

    def read(self, backend: Any, graph: CudaGraph, node: Any) -> Any:
        return FreeParams(int(call(drv.graph_mem_free_node_get_params, node)))


class _Conditional(_Kind):
    """A conditional node (CUDA 12.3: IF and WHILE; 12.8: IF with an else body, SWITCH). The driver has no
    getter for it before CUDA 13.2, so its record, with its bodies, is kept in ``graph.params``."""

    record = ConditionalParams
    node_type = _T.CU_GRAPH_NODE_TYPE_CONDITIONAL
    types: ClassVar[dict[str, Any]] = {"if": cu.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_IF,
                                       "while": cu.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE,
                                       "switch": cu.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_SWITCH}

    def add(self, backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        if params.type == "switch" or len(params.bodies) == 2:
            require_driver(12080, "a SWITCH node (Graph.add_switch)" if params.type == "switch" else
                           "an IF node with an else body (Graph.add_if(has_else=True))", "cuGraphAddNode")
        p = cu.CUgraphNodeParams()
        p.type = self.node_type
        p.conditional.handle = condition_handle(params.condition)
        p.conditional.type = self.types[params.type]
        p.conditional.size = len(params.bodies)
        p.conditional.ctx = backend.contexts.get(graph.index)
        node = call(cu.cuGraphAddNode, graph.handle, deps, None, len(deps), p)
        # (The driver owns the bodies, which go with the node: copied out of its array, never destroyed here.)
        bodies = tuple(CudaGraph(cu.CUgraph(int(body)), graph.index) for body in p.conditional.phGraph_out)
        graph.params[node] = ConditionalParams(params.type, params.condition, bodies)
        return node


_KERNEL = _Kernel()
_UNKNOWN = _Kind()
_KINDS = (_KERNEL, _Memcpy(), _Memset(), _Host(), _Empty(), _ChildGraph(), _EventRecord(), _EventWait(), _Alloc(),
          _Free(), _Conditional(), _SemaphoreSignal(), _SemaphoreWait(), _MemOps())
_BY_RECORD: dict[Any, _Kind] = {kind.record: kind for kind in _KINDS}
_BY_NODE_TYPE: dict[Any, _Kind] = {kind.node_type: kind for kind in _KINDS}


def _kind(params: Any) -> _Kind:
    """The kind of a parameter record (the refusing base kind for a type that is no record)."""
    return _BY_RECORD.get(type(params), _UNKNOWN)


def add_node(backend: Any, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
    """Add the driver node for ``params`` after ``deps`` (its kind's ``add``)."""
    kind = _KERNEL if type(params) is KernelParams else _kind(params)  # (kernel nodes: the hot path)
    return kind.add(backend, graph, params, deps)


def set_graph_node(backend: Any, graph: CudaGraph, node: Any, params: Any) -> None:
    """Change one node of a graph (its kind's ``set_graph``)."""
    _kind(params).set_graph(backend, graph, node, params)


def set_exec_node(backend: Any, exec_: Any, node: Any, params: Any) -> None:
    """Change one node of an executable graph (its kind's ``set_exec``)."""
    kind = _KERNEL if type(params) is KernelParams else _kind(params)
    kind.set_exec(backend, exec_, node, params)


def derive_params(backend: Any, graph: CudaGraph, node: Any) -> Any:
    """A parameter record read back from the driver, for nodes gpugraph did not record itself (a node of a
    type gpugraph does not know reads back as an empty node)."""
    return _BY_NODE_TYPE.get(call(drv.graph_node_get_type, node), _UNKNOWN).read(backend, graph, node)


def describes(record: Any, derived: Any) -> bool:
    """Whether a queued record describes a node whose parameters the driver reports as ``derived``."""
    return type(record) is type(derived) and _kind(record).describes(record, derived)


def param_patcher(backend: Any, exec_: Any, node: Any, params: Any) -> Any:
    """A prepared patch of a kernel node whose arguments include Params: its own argument slots, of which a patch
    rewrites only the Param slots before setting the node (``_exec_state.KernelPatch``)."""
    if not isinstance(params, KernelParams) or params.kernel.signature is None:
        return lambda: set_exec_node(backend, exec_, node, params)
    function = backend.function(params.device, params.kernel)
    with function.lock:  # the slots' codes are read from the layout this pack made, before another can
        function.pack(tuple([resolve(a) for a in params.args]))
        slots = function.copy_arguments()  # this node's own copy of the packed arguments
        patched = [(i, function.slot_code(i), arg, arg.is_array) for i, arg in enumerate(params.args)
                   if type(arg) is Param]
    hot = backend.hot
    return KernelPatch(hot, exec_.raw, exec_.context, hot.node_address(node), function.raw, params.grid,
                       params.block, params.shared_mem, slots, patched,
                       functools.partial(backend.contexts.make_current, exec_.index), fail)


def _function_name(func: Any) -> str:
    name = call(drv.func_get_name, func)
    return name.decode() if isinstance(name, bytes) else str(name)
