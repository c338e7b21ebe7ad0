"""Instantiate options: the flags an executable graph is made with, and the rules of a graph launched from the device.

``Graph.instantiate`` takes them as keywords; ``GraphExec.flags`` reads them back (cudaGraphExecGetFlags). The front
end keeps them, since the driver does not report all of them (use_node_priority read back as 0 on the H200, driver
580: measured).
"""

from __future__ import annotations

from typing import Any

from . import _graph_reads
from ._device_like import DeviceLike
from ._errors import GraphInstantiateError
from ._graph_reads import GraphFields
from ._memory import Array
from ._nodes import NodeKind
from ._scalars import as_bool, describe

# cudaGraphInstantiateFlags, by name (upload, cudaGraphInstantiateFlagUpload, is instantiate's upload= Stream).
INSTANTIATE_FLAGS = ("auto_free_on_launch", "device_launch", "use_node_priority")

# What a graph launched from the device may hold (cudaGraphInstantiateFlagDeviceLaunch).
_DEVICE_LAUNCH_KINDS = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.GRAPH})


def instantiate_flags(auto_free_on_launch: Any, device_launch: Any, use_node_priority: Any) -> frozenset[str]:
    """The flags named by ``Graph.instantiate``'s keywords, checked."""
    given = {"auto_free_on_launch": auto_free_on_launch, "device_launch": device_launch,
             "use_node_priority": use_node_priority}
    for name, value in given.items():
        if as_bool(value) is None:
            raise TypeError(f"instantiate({name}): expected a bool, got {describe(value)}")
    given = {name: bool(value) for name, value in given.items()}
    if auto_free_on_launch and device_launch:
        raise ValueError("instantiate: auto_free_on_launch and device_launch cannot be combined (CUDA refuses it)")
    return frozenset(name for name, value in given.items() if value)


def check_device_launch(graph: GraphFields[Any]) -> None:
    """Refuse, naming the node, what a graph launched from the device may not hold: nodes other than kernels,
    copies, memsets and child graphs, and work on another device than the graph's; an empty graph too. A node of a
    child graph is named by the child-graph node holding it, as the driver's refusal is (``name_the_node``)."""
    if not _graph_reads.topology(graph).records:
        raise GraphInstantiateError("instantiate error", detail="device_launch: the graph is empty (CUDA refuses it)")
    fault = _device_launch_fault(graph, graph.device)
    if fault is not None:
        handle, reason, detail = fault
        raise GraphInstantiateError(reason, _graph_reads.node_of(graph, handle), f"device_launch: {detail}")


def _device_launch_fault(graph: GraphFields[Any], device: DeviceLike) -> tuple[Any, str, str] | None:
    """(The handle of ``graph``'s node at fault, the reason, what is wrong), or None: see check_device_launch."""
    topology = _graph_reads.topology(graph)
    for handle, record in zip(topology.handles, topology.records):
        kind = record.kind
        if kind not in _DEVICE_LAUNCH_KINDS:
            return handle, "node operation not supported", (
                f"a graph launched from the device holds only kernel, memcpy, memset and child-graph nodes, got a "
                f"node of kind {kind.value}")
        if kind is NodeKind.KERNEL:
            elsewhere = [] if record.device == device.index else [f"the kernel runs on device {record.device}"]
        elif kind is NodeKind.MEMSET:
            elsewhere = [f"dst is on {record.dst.device}"] if _elsewhere(record.dst, device) else []
        elif kind is NodeKind.MEMCPY:
            operands = (("dst", record.dst), ("src", record.src))
            elsewhere = [f"{name} is on {operand.device}" for name, operand in operands if _elsewhere(operand, device)]
        else:  # a child graph: named by its node here
            inner = _device_launch_fault(_graph_reads.embedded_graphs(graph, handle)[0], device)
            if inner is None:
                continue
            return handle, inner[1], f"in its child graph: {inner[2]}"
        if elsewhere:
            return handle, "multiple devices not supported", (
                f"{elsewhere[0]}, the graph on {device}; a graph launched from the device runs on one")
    return None


def _elsewhere(operand: Any, device: DeviceLike) -> bool:
    """Whether a copy's or memset's operand is an Array of another device than ``device`` (host memory is not)."""
    return isinstance(operand, Array) and operand.device is not device


def name_the_node(graph: GraphFields[Any], refused: GraphInstantiateError) -> GraphInstantiateError:
    """``refused``, raised by a backend naming its node handle (or None), with the Node of ``graph`` it names; a node
    of a child graph is named by the child-graph node holding it."""
    handle = refused.node
    if handle is None:
        return refused
    node = _holding(graph, handle)
    detail = refused.detail if node is not None else f"{refused.detail}, at a node gpugraph does not know"
    return GraphInstantiateError(refused.reason, node, detail)


def _holding(graph: GraphFields[Any], handle: Any) -> Any:
    """The Node of ``graph`` that is, or holds in its child graphs, the backend node ``handle``; None if none."""
    topology = _graph_reads.topology(graph)
    if handle in topology.position:
        return _graph_reads.node_of(graph, handle)
    for own, record in zip(topology.handles, topology.records):
        embedded = _graph_reads.embedded_graphs(graph, own) if record.kind is NodeKind.GRAPH else ()
        if embedded and _holding(embedded[0], handle) is not None:
            return _graph_reads.node_of(graph, own)
    return None
