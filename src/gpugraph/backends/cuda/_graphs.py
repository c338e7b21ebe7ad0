"""The CUDA backend's graph layer: graphs and executable graphs (see _backend)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from cuda.bindings import driver as cu

from ..._attributes import AttributeLimits, KernelAttributes
from ..._errors import BackendError, GraphError, GraphInstantiateError
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._nodes import AllocParams, ChildGraphParams, FreeParams, NodeKind
from .._allocation import Allocation
from .._graph_memory import GraphMemoryRules
from . import _compiled, _leaves
from ._attributes import cooperative_blocks, limits, read_attributes, write_attributes
from ._capture import CudaCapturing
from ._driver import call, error, fail, require_driver
from ._nodes import add_node, derive_params, param_patcher, set_exec_node, set_graph_node
from ._objects import CudaCapture, CudaExec, CudaGraph, CudaStream
from ._runtime import INVALID_CONTEXT, access_descriptor, allocate
from ._structs import edge_data, kind_of
from ._symbols import CUDA, drv

_RESULT = cu.CUgraphExecUpdateResult
_FLAG = cu.CUgraphInstantiate_flags
_INSTANTIATED = cu.CUgraphInstantiateResult
# The driver's instantiate refusals in the words of GraphInstantiateError (success and a plain error: the driver's
# error is raised instead).
_INSTANTIATE_REASONS = {
    _INSTANTIATED.CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: "invalid structure",
    _INSTANTIATED.CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED: "node operation not supported",
    _INSTANTIATED.CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED: "multiple devices not supported",
    _INSTANTIATED.CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED: "conditional handle unused"}
# The driver's update refusals in the words of gpugraph._update's rules.
_UPDATE_REASONS = {_RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: "topology changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: "node kind changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: "kernel function changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: "kernel function changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: "parameters changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: "unsupported node kind",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: "attributes changed"}


def _newer(generic: str) -> Any:
    """The driver function ``generic`` names; BackendError where this cuda-bindings is older than it."""
    fn = getattr(drv, generic, None)
    if fn is None:
        name = CUDA[generic]
        raise BackendError("cuda", name, "CUDA_ERROR_NOT_SUPPORTED",
                           f"this cuda-bindings has no {name}; install cuda-bindings 13.1 or newer")
    return fn


class CudaGraphs(CudaCapturing):
    """Graphs built node by node, and executable graphs: instantiate, launch, update and the setters."""

    # User objects

    def user_object_create(self, destroy: Any, count: int) -> Any:
        key = self.host.register(destroy, (), None, True)  # (one-shot: the driver calls it once, on its thread)
        return call(drv.user_object_create, key, self.host.fn, count,
                    cu.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)

    def user_object_retain(self, obj: Any, count: int) -> None:
        call(drv.user_object_retain, obj, count)

    def user_object_release(self, obj: Any, count: int, collected: bool) -> None:
        if not collected:  # (cuUserObjectRelease does not synchronize: the caller's release is made at once)
            call(drv.user_object_release, obj, count)
            return
        # A collected object's release waits where the driver refuses calls (a destructor's thread)
        self._release(call, drv.user_object_release, obj, count)

    def graph_retain_user_object(self, graph: CudaGraph, obj: Any, count: int, move: bool) -> None:
        flags = cu.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE if move else 0
        call(drv.graph_retain_user_object, graph.handle, obj, count, int(flags))

    def graph_release_user_object(self, graph: CudaGraph, obj: Any, count: int) -> None:
        call(drv.graph_release_user_object, graph.handle, obj, count)

    # Graphs

    def graph_create(self, index: int) -> CudaGraph:
        self.contexts.use(index)
        return CudaGraph(call(drv.graph_create, 0), index)

    def graph_destroy(self, graph: CudaGraph) -> None:
        self._release(self._in_context_leaf, graph.index, "cuGraphDestroy", _leaves.graph_destroy,
                      int(graph.handle))

    def graph_add_node(self, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        # The front end keeps the node's record; only a child graph's copy and host keys are kept here.
        self.contexts.use(graph.index)
        if graph.before is None and params.kind is not NodeKind.GRAPH:  # (the hot path of explicit building)
            return add_node(self, graph, params, list(deps))
        with graph.lock:  # the node and what is kept of it appear together to a pairing on another thread
            node = add_node(self, graph, params, list(deps))
            if params.kind is NodeKind.GRAPH:
                self._keep_records(graph, node, params)
            elif graph.before is not None:  # a capture records into the graph: its pairing must leave this be
                graph.before.add(node)
        return node

    def graph_condition(self, graph: CudaGraph, default: int, reset: bool) -> tuple[Any, int]:
        require_driver(12030, "a conditional node's condition (Graph.condition)",
                               "cuGraphConditionalHandleCreate")
        self.contexts.use(graph.index)
        flags = cu.CU_GRAPH_COND_ASSIGN_DEFAULT if reset else 0
        handle = call(cu.cuGraphConditionalHandleCreate, graph.handle, self.contexts.get(graph.index), default,
                      int(flags))
        return handle, int(handle)

    def graph_add_alloc(self, graph: CudaGraph, nbytes: int, deps: Sequence[Any], index: int,
                        access: tuple[int, ...]) -> tuple[Any, int, Allocation]:
        self.contexts.use(index)
        p = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
        p.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        p.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        p.poolProps.location.id = index
        p.bytesize = max(nbytes, 1)
        if access:  # (measured on the H200: the driver maps it for each peer; no cuCtxEnablePeerAccess is needed)
            p.accessDescs = [access_descriptor(peer) for peer in access]
            p.accessDescCount = len(access)
        with graph.lock:  # the node and its records appear together to a pairing on another thread
            node = allocate(nbytes, "graph", drv.graph_add_mem_alloc_node, graph.handle, list(deps), len(deps), p)
            ptr = int(p.dptr)  # the driver may give it the address of an allocation freed before it
            alloc = Allocation(ptr, nbytes, "graph", index)
            alloc.access = access
            graph.memory[node] = alloc
            graph.params[node] = AllocParams(nbytes, ptr, index, access)
        return node, ptr, alloc

    def graph_add_free(self, graph: CudaGraph, alloc: Allocation, deps: Sequence[Any]) -> Any:
        self.contexts.use(graph.index)
        params = FreeParams(alloc.ptr)
        with graph.lock:
            node = add_node(self, graph, params, list(deps))
            graph.params[node] = params
            graph.memory[node] = alloc
        return node

    def node_allocation(self, graph: CudaGraph, node: Any) -> Allocation | None:
        if graph.pending:
            self._settle(graph)
        return graph.memory.get(node)

    def graph_destroy_node(self, graph: CudaGraph, node: Any) -> None:
        graph.params.pop(node, None)
        graph.memory.pop(node, None)
        graph.foreign.discard(node)
        graph.children.pop(node, None)
        graph.host_keys.pop(node, None)
        if graph.before is not None:
            graph.before.discard(node)
        call(drv.graph_destroy_node, node)

    def graph_set_node(self, graph: CudaGraph, node: Any, params: Any) -> None:
        self.contexts.use(graph.index)
        if graph.pending:  # (the records of captured nodes are paired first: this one's is replaced below)
            self._settle(graph)
        set_graph_node(self, graph, node, params)
        if node in graph.params:
            graph.params[node] = params

    def graph_add_dependency(self, graph: CudaGraph, src: Any, dst: Any, kind: str) -> None:
        call(drv.graph_add_dependencies, graph.handle, [src], [dst], None if kind == "full" else [edge_data(kind)], 1)

    def _kinded_edges(self, graph: CudaGraph) -> set[tuple[int, int, str]]:
        """The edges of ``graph`` that are not full, as (source position, target position, kind), the positions
        in creation order."""
        count = call(drv.graph_get_edges, graph.handle, 0)[-1]
        if not count:
            return set()
        sources, targets, data, count = call(drv.graph_get_edges, graph.handle, count)
        position = {int(node): i for i, node in enumerate(self.graph_nodes(graph))}
        return {(position[int(s)], position[int(t)], kind_of(e))
                for s, t, e in zip(list(sources)[:count], list(targets)[:count], list(data)[:count])
                if int(e.type) or int(e.from_port)}

    def graph_dependency_kind(self, graph: CudaGraph, src: Any, dst: Any) -> str:
        count = call(drv.graph_node_get_dependencies, dst, 0)[-1]
        nodes, data, count = call(drv.graph_node_get_dependencies, dst, count)
        for node, edge in zip(list(nodes)[:count], list(data)[:count]):
            if int(node) == int(src):
                return kind_of(edge)
        raise GraphError(f"no edge from node {int(src):#x} to node {int(dst):#x} in the CUDA graph")

    def graph_remove_dependency(self, graph: CudaGraph, src: Any, dst: Any) -> None:
        call(drv.graph_remove_dependencies, graph.handle, [src], [dst], None, 1)

    def graph_edges(self, graph: CudaGraph) -> list[tuple[Any, Any]]:
        count = call(drv.graph_get_edges, graph.handle, 0)[-1]
        if not count:
            return []
        sources, targets, _, count = call(drv.graph_get_edges, graph.handle, count)
        return list(zip(list(sources)[:count], list(targets)[:count]))

    def graph_dependencies(self, graph: CudaGraph, nodes: list[Any]) -> tuple[list[Any], bool] | None:
        fast = _compiled.fast
        return None if fast is None else fast.graph_dependencies(int(graph.handle), nodes)

    def graph_has_shape(self, graph: CudaGraph, count: int, shape: tuple[Any, ...]) -> bool | None:
        fast = _compiled.fast
        return None if fast is None else fast.graph_has_shape(int(graph.handle), count, shape)

    def node_params(self, graph: CudaGraph, node: Any) -> Any:
        params = graph.params.get(node)
        if params is not None:
            return params
        if graph.pending:
            self._settle(graph)
            return self.node_params(graph, node)
        child = graph.children.get(node)
        return ChildGraphParams(child) if child is not None else derive_params(self, graph, node)

    # Kernel node attributes

    def kernel_attribute_limits(self, index: int) -> AttributeLimits:
        self.contexts.use(index)
        return limits(self.contexts.devices[index])

    def kernel_cooperative_blocks(self, index: int, kernel: Any, threads: int, shared_mem: int) -> int:
        self.contexts.use(index)
        return cooperative_blocks(self.function(index, kernel).handle, self.contexts.devices[index], threads,
                                  shared_mem)

    def node_attributes(self, graph: CudaGraph, node: Any) -> KernelAttributes:
        self.contexts.use(graph.index)
        return read_attributes(node)

    def node_set_attributes(self, graph: CudaGraph, node: Any, attributes: KernelAttributes) -> None:
        self.contexts.use(graph.index)
        write_attributes(node, attributes, read_attributes(node))

    def node_copy_attributes(self, graph: CudaGraph, node: Any, src_graph: CudaGraph, src: Any) -> None:
        self.contexts.use(graph.index)
        call(drv.graph_kernel_node_copy_attributes, node, src)

    def graph_debug_dot(self, graph: CudaGraph, path: str, flags: tuple[str, ...]) -> bool:
        bits = 0
        for flag in flags:
            bit = getattr(cu.CUgraphDebugDot_flags, f"CU_GRAPH_DEBUG_DOT_FLAGS_{flag.upper()}", None)
            if bit is None:
                raise ValueError(f"debug_dot_print(flags): this cuda-bindings ({cu.__name__}) has no flag {flag!r}")
            bits |= int(bit)
        call(drv.graph_debug_dot_print, graph.handle, os.fsencode(path), bits)
        return True

    def graph_id(self, graph: CudaGraph) -> int:
        require_driver(13010, "a graph's id (Graph.id)", "cuGraphGetId")
        return int(call(_newer("graph_get_id"), graph.handle))

    def node_ids(self, graph: CudaGraph, node: Any) -> tuple[int, int]:
        require_driver(13010, "a node's ids (Node.local_id, Node.tools_id)", "cuGraphNodeGetLocalId")
        return int(call(_newer("graph_node_get_local_id"), node)), int(call(_newer("graph_node_get_tools_id"), node))

    def exec_id(self, exe: CudaExec) -> int:
        require_driver(13010, "an executable graph's id (GraphExec.id)", "cuGraphExecGetId")
        return int(call(_newer("graph_exec_get_id"), exe.handle))

    def graph_clone(self, graph: CudaGraph) -> CudaGraph:
        self.contexts.use(graph.index)
        self._settle(graph)
        return self.embedded_copy(graph, call(drv.graph_clone, graph.handle))

    def graph_instantiate(self, graph: CudaGraph, flags: frozenset[str]) -> CudaExec:
        self.contexts.use(graph.index)
        params = cu.CUDA_GRAPH_INSTANTIATE_PARAMS()
        params.flags = sum(int(getattr(_FLAG, f"CUDA_GRAPH_INSTANTIATE_FLAG_{name.upper()}")) for name in flags)
        err, handle = drv.graph_instantiate_with_params(graph.handle, params)
        if err:
            reason = _INSTANTIATE_REASONS.get(params.result_out)
            if reason is None:
                raise error("cuGraphInstantiateWithParams", err)
            raise GraphInstantiateError(reason, params.hErrNode_out if int(params.hErrNode_out) else None,
                                        f"cuGraphInstantiateWithParams: {err.name}")
        allocated, freed = self._memory_nodes(graph)
        host_keys: list[int] = []
        self.collect_host_keys(graph, host_keys)
        auto_free = "auto_free_on_launch" in flags
        exec_ = CudaExec(handle, graph.index, host_keys, GraphMemoryRules.of(allocated, freed, auto_free), graph,
                         int(self.contexts.get(graph.index)))
        if "device_launch" in flags:
            exec_.device_launch = True
            try:
                self._upload_now(exec_)
            except BaseException:
                call(drv.graph_exec_destroy, handle)
                raise
        return exec_

    def _upload_now(self, exec_: CudaExec) -> None:
        """Upload an executable graph instantiated with device_launch (made, or changed), and wait for it: a kernel
        launches only an uploaded graph, as it was uploaded (cudaGraphLaunch on the device returns
        cudaErrorInvalidValue before, and runs the old parameters after set_params or update until uploaded again:
        measured on the H200), and that kernel may run on any stream."""
        stream = call(drv.stream_create_with_priority, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0)
        try:
            call(drv.graph_upload, exec_.handle, stream)
            call(drv.stream_synchronize, stream)
        finally:
            call(drv.stream_destroy, stream)

    def exec_upload_for_kernels(self, exec_: CudaExec) -> None:
        self.contexts.use(exec_.index)
        self._upload_now(exec_)

    def _destroy_launchable(self, exec_: CudaExec) -> None:
        """Destroy an executable graph a kernel may launch once the device's queued work has run: a kernel queued
        may still launch it, and no argument the front end sees holds it (a closed launching graph's queued launch)."""
        self.contexts.use(exec_.index)
        # (The result is the queued work's, which the next synchronize reports: a sticky error stays.)
        drv.ctx_synchronize()
        call(drv.graph_exec_destroy, exec_.handle)

    def exec_device_handle(self, exec_: CudaExec) -> int:
        return exec_.raw

    def graph_builder(self, graph: CudaGraph, device: Any) -> Any:
        fast = _compiled.fast
        return None if fast is None else fast.Builder(int(graph.handle), int(self.contexts.get(graph.index)), device,
                                                      graph, fail)

    def _memory_nodes(self, graph: CudaGraph) -> tuple[list[Allocation], list[Allocation]]:
        """A graph's allocations and frees (child graphs cannot hold any), from the allocation records of
        the memory nodes gpugraph made: by node, as addresses repeat once the driver reuses them."""
        self._settle(graph)
        allocated: list[Allocation] = []
        freed: list[Allocation] = []
        for node, alloc in graph.memory.items():
            (allocated if isinstance(graph.params[node], AllocParams) else freed).append(alloc)
        return allocated, freed

    def exec_launch(self, exec_: CudaExec, stream: CudaStream, capture: CudaCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.launch")
        if capture is not None:  # the driver refuses cuGraphLaunch into a capture: embed a child
            self.contexts.use(stream.index)
            if exec_.template is None:  # made once, from the graph the front end keeps unchanged and alive
                exec_.template = self.graph_clone(exec_.source)
            if self._add_at_frontier(capture, stream, ChildGraphParams(exec_.template)) is not None:
                return True  # (else the capture ended meanwhile, on another thread: launched as uncaptured)
        memory = exec_.memory
        if memory is not None:
            memory.check()
        if exec_.host_keys and exec_.host_stream is not stream:
            exec_.host_stream = stream
            for key in exec_.host_keys:
                self.host.set_stream(key, stream)
        if memory is None:
            err = _leaves.graph_launch(exec_.raw, stream.raw)
            if err:
                if err != INVALID_CONTEXT:
                    fail("cuGraphLaunch", err)
                self._retry_in_context(drv.graph_launch, stream.index, exec_.handle, stream.handle)
            return False
        self._launch_with_memory(exec_, stream, memory)
        return False

    def _launch_with_memory(self, exec_: CudaExec, stream: CudaStream, memory: Any) -> None:
        """Launch a graph that allocates or frees, and note what it leaves allocated, all or nothing.

        A KeyboardInterrupt that surfaces from the cuGraphLaunch call was raised at the check point just after
        it returned: the driver has the launch (whose result is lost with the interrupt), so the allocations
        are noted all the same; one raised while noting them is followed by noting them again (idempotent).
        """
        try:
            err = _leaves.graph_launch(exec_.raw, stream.raw)
        except BaseException:
            memory.commit()
            raise
        if err:
            if err != INVALID_CONTEXT:
                fail("cuGraphLaunch", err)
            self._retry_in_context(drv.graph_launch, stream.index, exec_.handle, stream.handle)
        try:
            memory.commit()
        except BaseException:
            memory.commit()
            raise

    def exec_set_node(self, exec_: CudaExec, node: Any, params: Any) -> None:
        self.contexts.use(exec_.index)
        set_exec_node(self, exec_, node, params)

    def exec_param_patcher(self, exec_: CudaExec, node: Any, params: Any) -> Any:
        self.contexts.use(exec_.index)
        return param_patcher(self, exec_, node, params)

    def exec_set_enabled(self, exec_: CudaExec, node: Any, enabled: bool) -> None:
        self.contexts.use(exec_.index)
        call(drv.graph_node_set_enabled, exec_.handle, node, int(enabled))

    def exec_update(self, exec_: CudaExec, graph: CudaGraph, originals: list[Any]) -> tuple[str, Any] | None:
        self.contexts.use(exec_.index)
        err, result, node = self._exec_update(exec_, graph)
        if err:
            if err != cu.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
                raise error("cuGraphExecUpdate", err)
            if result is None:  # some cuda-bindings releases return no result info with an error
                if self._kinded_edges(exec_.source) != self._kinded_edges(graph):
                    return "topology changed", None  # (an edge's kind, which the driver gives no result for)
                return "refused by the CUDA driver", None
            return _UPDATE_REASONS.get(result, f"refused by the CUDA driver ({result!r})"), node
        host_keys: list[int] = []
        self.collect_host_keys(graph, host_keys)
        for key in exec_.own_keys.values():  # the update replaced what setters had set
            self.host.forget(key)
        exec_.own_keys.clear()
        exec_.host_keys = host_keys
        exec_.host_stream = None
        template, exec_.source, exec_.template = exec_.template, graph, None
        if template is not None:  # forgotten first: an update made again after an interrupt must not destroy it twice
            self.graph_destroy(template)
        return None

    @staticmethod
    def _exec_update(exec_: CudaExec, graph: CudaGraph) -> tuple[Any, Any, Any]:
        """cuGraphExecUpdate: (the driver's result, or 0; the update's result, None if the driver gave none; the
        node it names, or None)."""
        code, result, node = _leaves.exec_update(exec_.raw, int(graph.handle))
        if not code:
            return 0, None, None
        named: Any = None
        if result:  # (0, success: the driver gave no result with its error)
            try:
                named = cu.CUgraphExecUpdateResult(result)
            except ValueError:  # (a result this cuda-bindings does not name: given as the driver's number)
                named = result
        return cu.CUresult(code), named, cu.CUgraphNode(node) if node else None

    def collect_host_keys(self, graph: CudaGraph, keys: list[int]) -> None:
        """Add the registry keys of a graph's host nodes, child graphs included, to ``keys``."""
        self._settle(graph)
        keys.extend(graph.host_keys.values())
        for child in graph.children.values():
            self.collect_host_keys(child, keys)

    def exec_upload(self, exec_: CudaExec, stream: CudaStream) -> None:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.upload")
        self.contexts.use(stream.index)
        call(drv.graph_upload, exec_.handle, stream.handle)

    def exec_destroy(self, exec_: CudaExec) -> None:
        for key in exec_.own_keys.values():
            self._release(self.host.forget, key)
        if exec_.device_launch:
            self._release(self._destroy_launchable, exec_)
        else:
            self._release(self._in_context, exec_.index, drv.graph_exec_destroy, exec_.handle)
        if exec_.template is not None:
            self.graph_destroy(exec_.template)
