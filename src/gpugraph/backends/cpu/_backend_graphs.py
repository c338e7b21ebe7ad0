"""CpuGraphs: the CPU backend's graphs (``_graphs``: plain Python DAGs), their user objects and kernel node
attributes, and executable graphs (``_executor``); on CpuCapturing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._attributes import AttributeLimits, AttributeRefusal, KernelAttributes, launch_refusal
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._nodes import AllocParams, ChildGraphParams, FreeParams, NodeKind
from .._allocation import Allocation
from ._backend_capture import CpuCapturing
from ._capture import CpuCapture
from ._executor import CpuExec
from ._graphs import CpuCondition, CpuGraph, CpuNode, CpuUserObject, copied, update_refusal
from ._streams import CpuStream

# What the CPU devices allow of kernel node attributes: an H200's figures (priorities 0 to -5, a 128-MiB access
# policy window, clusters and cooperative launches), so that a program's attributes meet the rules they meet there.
_LIMITS = AttributeLimits((0, -5), 128 << 20, True, True)
_MULTIPROCESSORS, _SHARED_PER_SM = 132, 228 << 10


class CpuGraphs(CpuCapturing):
    """Graphs and executable graphs: the top layer of CpuBackend."""

    _schedule_seed: int | None = None  # (CpuBackend.schedule_seed: given to the graphs instantiated)

    # Graphs

    # User objects

    def user_object_create(self, destroy: Any, count: int) -> CpuUserObject:
        return CpuUserObject(destroy, count)

    def user_object_retain(self, obj: CpuUserObject, count: int) -> None:
        obj.retain(count)

    def user_object_release(self, obj: CpuUserObject, count: int, collected: bool) -> None:
        obj.release(count)

    def graph_retain_user_object(self, graph: CpuGraph, obj: CpuUserObject, count: int, move: bool) -> None:
        if not move:
            obj.retain(count)
        graph.hold(obj, count)

    def graph_release_user_object(self, graph: CpuGraph, obj: CpuUserObject, count: int) -> None:
        graph.let_go(obj, count)

    def graph_create(self, index: int) -> CpuGraph:
        return CpuGraph(index)

    def graph_destroy(self, graph: CpuGraph) -> None:
        pass

    def graph_add_node(self, graph: CpuGraph, params: Any, deps: Sequence[CpuNode]) -> CpuNode:
        return graph.add(params, deps)

    def graph_condition(self, graph: CpuGraph, default: int, reset: bool) -> tuple[CpuCondition, int]:
        condition = CpuCondition(default, reset)
        return condition, condition.handle

    def graph_add_alloc(self, graph: CpuGraph, nbytes: int, deps: Sequence[CpuNode], index: int,
                        access: tuple[int, ...]) -> tuple[CpuNode, int, Any]:
        alloc = self._new_allocation(index, nbytes, self._graph_pools[index], "graph",
                                     graph.reusable_address(nbytes, deps, index))
        alloc.access = access
        node = graph.add(AllocParams(nbytes, alloc.ptr, index, access), deps, alloc)
        return node, alloc.ptr, alloc

    def graph_add_free(self, graph: CpuGraph, alloc: Allocation, deps: Sequence[CpuNode]) -> CpuNode:
        return graph.add(FreeParams(alloc.ptr), deps, alloc)

    def node_allocation(self, graph: CpuGraph, node: CpuNode) -> Allocation | None:
        return node.alloc

    def graph_destroy_node(self, graph: CpuGraph, node: CpuNode) -> None:
        for dep in node.deps:
            dep.dependents.remove(node)
        for dependent in node.dependents:
            dependent.deps.remove(node)
            dependent.kinds.pop(node, None)
        graph.nodes.remove(node)

    def graph_set_node(self, graph: CpuGraph, node: CpuNode, params: Any) -> None:
        node.params = copied(params)  # (an executable graph runs a copy of the graph: CpuExec.template)

    def graph_add_dependency(self, graph: CpuGraph, src: CpuNode, dst: CpuNode, kind: str) -> None:
        dst.deps.append(src)
        src.dependents.append(dst)
        if kind != "full":
            dst.kinds[src] = kind

    def graph_dependency_kind(self, graph: CpuGraph, src: CpuNode, dst: CpuNode) -> str:
        return dst.kinds.get(src, "full")

    def graph_remove_dependency(self, graph: CpuGraph, src: CpuNode, dst: CpuNode) -> None:
        dst.deps.remove(src)
        src.dependents.remove(dst)
        dst.kinds.pop(src, None)

    def graph_nodes(self, graph: CpuGraph) -> list[CpuNode]:
        return list(graph.nodes)

    def graph_edges(self, graph: CpuGraph) -> list[tuple[CpuNode, CpuNode]]:
        return graph.edges()

    def graph_dependencies(self, graph: CpuGraph, nodes: list[CpuNode]) -> None:
        return None  # (no compiled lane: the front end reads graph_edges)

    def graph_has_shape(self, graph: CpuGraph, count: int, shape: tuple[Any, ...]) -> None:
        return None  # (no compiled lane: the front end reads graph_edges)

    def node_params(self, graph: CpuGraph, node: CpuNode) -> Any:
        return node.params

    def graph_debug_dot(self, graph: CpuGraph, path: str, flags: tuple[str, ...]) -> bool:
        return False  # (no driver: the front end writes gpugraph's DOT)

    def graph_clone(self, graph: CpuGraph) -> CpuGraph:
        return graph.clone()

    def graph_id(self, graph: CpuGraph) -> int:
        return graph.id

    def node_ids(self, graph: CpuGraph, node: CpuNode) -> tuple[int, int]:
        return node.local_id, graph.id << 32 | node.local_id  # (the tools id: this backend's own, unique too)

    def exec_id(self, exe: CpuExec) -> int:
        return exe.id

    def graph_instantiate(self, graph: CpuGraph, flags: frozenset[str]) -> CpuExec:
        # (use_node_priority: the CPU backend runs ready nodes as its threads take them, a preference CUDA may not
        # follow either, but an update keeps the priorities; device_launch: a kernel may launch it, see
        # _executor.CpuExec)
        return CpuExec(graph, "auto_free_on_launch" in flags, "use_node_priority" in flags, self._thread_pool,
                       "device_launch" in flags, schedule_seed=self._schedule_seed)

    def exec_device_handle(self, exe: CpuExec) -> int:
        return exe.id  # (the number the CPU header's cudaGraphLaunch is given for it)

    # Kernel node attributes: kept by the nodes; a kernel's attributes change nothing of what it computes here

    def kernel_attribute_limits(self, index: int) -> AttributeLimits:
        return _LIMITS

    def kernel_cooperative_blocks(self, index: int, kernel: Any, threads: int, shared_mem: int) -> int:
        # The CPU device's model of residency: an H200's 132 multiprocessors of 2048 threads, 32 blocks and 228 KiB
        # of shared memory each, so that a program meets the limit it meets there, whatever the host.
        per_sm = min(32, 2048 // threads, _SHARED_PER_SM // shared_mem if shared_mem else 32)
        return per_sm * _MULTIPROCESSORS

    def node_attributes(self, graph: CpuGraph, node: CpuNode) -> KernelAttributes:
        return node.attributes

    def node_set_attributes(self, graph: CpuGraph, node: CpuNode, attributes: KernelAttributes) -> None:
        node.attributes = attributes

    def node_copy_attributes(self, graph: CpuGraph, node: CpuNode, src_graph: CpuGraph, src: CpuNode) -> None:
        node.attributes = src.attributes

    def graph_builder(self, graph: CpuGraph, device: Any) -> None:
        return None  # (no compiled path: every node takes graph_add_node)

    def exec_launch(self, exec_: CpuExec, stream: CpuStream, capture: CpuCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.launch")
        # Launching a graph into a capture embeds it as a child graph.
        if capture is not None and capture.record(stream, ChildGraphParams(exec_.template)):
            return True
        exec_.launch(stream)
        return False

    def exec_set_node(self, exec_: CpuExec, node: CpuNode, params: Any) -> None:
        if params.kind is NodeKind.KERNEL:  # (the attributes the exec's node has: the driver checks them on CUDA)
            block = params.block
            refusal = launch_refusal(exec_.template.clone_of[node].attributes, params.grid, block,
                                     lambda: self.kernel_cooperative_blocks(params.device, params.kernel,
                                                                            block[0] * block[1] * block[2],
                                                                            params.shared_mem))
            if refusal is not None:
                raise AttributeRefusal(refusal)
        exec_.set_node(node, params)

    def exec_param_patcher(self, exec_: CpuExec, node: CpuNode, params: Any) -> Any:
        return lambda: exec_.set_node(node, params)  # the node's step is compiled again with the new values

    def exec_set_enabled(self, exec_: CpuExec, node: CpuNode, enabled: bool) -> None:
        exec_.set_enabled(node, enabled)

    def exec_update(self, exec_: CpuExec, graph: CpuGraph, originals: list[CpuNode]) -> tuple[str, CpuNode] | None:
        refused = update_refusal([exec_.template.clone_of[node] for node in originals], graph.nodes,
                                 exec_.node_priority)
        if refused is None:
            exec_.update(graph, originals)
            exec_.template.replace_references(graph)  # the new graph's references replace the old (as on CUDA)
        return refused

    def exec_upload(self, exec_: CpuExec, stream: CpuStream) -> None:
        refuse_in_host_function("GraphExec.upload")
        if exec_.uploaded is not None:  # (instantiated with device_launch: kernels launch what is uploaded)
            self.exec_upload_for_kernels(exec_)

    def exec_upload_for_kernels(self, exec_: CpuExec) -> None:
        done = exec_.last_done
        if done is not None:  # CUDA's upload comes after the launches made before it, their tail launches included
            done.wait()
        exec_.upload()

    def exec_destroy(self, exec_: CpuExec) -> None:
        exec_.forget()
