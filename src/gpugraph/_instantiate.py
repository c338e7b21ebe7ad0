"""Instantiate options: the flags an executable graph is made with, and the rules of a graph launched from the device.

``Graph.instantiate`` takes them as keywords; ``GraphExec.flags`` reads them back (cudaGraphExecGetFlags). The front
end keeps them, since the driver does not report all of them (use_node_priority read back as 0 on the H200, driver
580: measured).
"""

from __future__ import annotations

from typing import Any

from ._errors import GraphInstantiateError
from ._nodes import NodeKind

# cudaGraphInstantiateFlags, by name (upload, cudaGraphInstantiateFlagUpload, is instantiate's upload= Stream).
INSTANTIATE_FLAGS = ("auto_free_on_launch", "device_launch", "use_node_priority")

# What a graph launched from the device may hold (cudaGraphInstantiateFlagDeviceLaunch).
_DEVICE_LAUNCH_KINDS = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.GRAPH})


def instantiate_flags(auto_free_on_launch: Any, device_launch: Any, use_node_priority: Any) -> frozenset[str]:
    """The flags named by ``Graph.instantiate``'s keywords, checked."""
    given = {"auto_free_on_launch": auto_free_on_launch, "device_launch": device_launch,
             "use_node_priority": use_node_priority}
    for name, value in given.items():
        if type(value) is not bool:
            raise TypeError(f"instantiate({name}): expected a bool, got {type(value).__name__}")
    if auto_free_on_launch and device_launch:
        raise ValueError("instantiate: auto_free_on_launch and device_launch cannot be combined (CUDA refuses it)")
    return frozenset(name for name, value in given.items() if value)


def check_device_launch(graph: Any) -> None:
    """Refuse, naming the node, what a graph launched from the device may not hold: nodes other than kernels,
    copies, memsets and child graphs, and work on another device than the graph's; an empty graph too."""
    topology = graph._current()
    if not topology.records:
        raise GraphInstantiateError("instantiate error", detail="device_launch: the graph is empty (CUDA refuses it)")
    for handle, record in zip(topology.handles, topology.records):
        if record.kind not in _DEVICE_LAUNCH_KINDS:
            raise GraphInstantiateError(
                "node operation not supported", graph._node(handle),
                f"device_launch: a graph launched from the device holds only kernel, memcpy, memset and child-graph "
                f"nodes, got a node of kind {record.kind.value}")
        if record.kind is NodeKind.KERNEL and record.device != graph.device.index:
            raise GraphInstantiateError(
                "multiple devices not supported", graph._node(handle),
                f"device_launch: the kernel runs on device {record.device}, the graph on {graph.device}; a graph "
                f"launched from the device runs on one")
        if record.kind is NodeKind.GRAPH:
            check_device_launch(graph._child(handle))


def name_the_node(graph: Any, refused: GraphInstantiateError) -> GraphInstantiateError:
    """``refused``, raised by a backend naming its node handle (or None), with the Node of ``graph`` it names; a node
    of a child graph is named by the child-graph node holding it."""
    handle = refused.node
    if handle is None:
        return refused
    node = _holding(graph, handle)
    detail = refused.detail if node is not None else f"{refused.detail}, at a node gpugraph does not know"
    return GraphInstantiateError(refused.reason, node, detail)


def _holding(graph: Any, handle: Any) -> Any:
    """The Node of ``graph`` that is, or holds in its child graphs, the backend node ``handle``; None if none."""
    topology = graph._current()
    if handle in topology.position:
        return graph._node(handle)
    for own, record in zip(topology.handles, topology.records):
        if record.kind is NodeKind.GRAPH and _holding(graph._child(own), handle) is not None:
            return graph._node(own)
    return None
