"""Graph: a template of operations (nodes) and their dependencies (edges), to be instantiated.

gpugraph keeps each graph's nodes, edges, kinds and parameter records itself, as they are added, so
that queries, cycle checks, free ordering and update's comparison ask no driver. What a capture records
(other libraries' work too) is read from the backend once, when the capture has ended (``Graph._load``);
explicitly built and captured graphs look the same. The rules CUDA applies are checked at the call that
breaks them.

``Graph`` is one state (``_graph_state.GraphState``: its slots and what its concerns share) and the mixins of its
concerns, combined here: building (``_graph_build``), conditional nodes (``_graph_conditional``), graph memory
(``_graph_alloc``), editing (``_graph_edit``) and queries (``_graph_query``). This module adds making a Graph,
instantiating it and its repr. Its nodes are ``_graph_node.Node``s.
"""

from __future__ import annotations

import weakref
from typing import Any

from . import _capture, _capture_rules, _hazards
from ._device import Device
from ._errors import GraphError
from ._exec import GraphExec, check_stream
from ._exec_state import take_layout
from ._graph_alloc import GraphAlloc
from ._graph_build import GraphBuild
from ._graph_conditional import GraphConditional
from ._graph_edit import GraphEdit
from ._graph_query import GraphQuery
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._instantiate import check_device_launch, instantiate_flags
from ._nodes import NodeKind
from .backends import get_backend


class Graph(GraphBuild, GraphConditional, GraphEdit, GraphAlloc, GraphQuery):
    """A graph template: nodes and dependency edges, to be instantiated into a ``GraphExec``.

    Args:
        device: The Device the graph runs on (default: ``Device()``).

    See also: cudaGraphCreate.
    """

    __slots__ = ()  # (the fields are GraphState's)

    def __init__(self, device: Device | None = None) -> None:
        device = Device() if device is None else device
        if not isinstance(device, Device):
            raise TypeError(f"Graph(device): expected a Device or None, got {type(device).__name__}")
        if HOST_THREADS:
            refuse_in_host_function("Graph()")
        backend = get_backend(device.backend)
        self._setup(device, backend.graph_create(device.index), owner=None)
        weakref.finalize(self, backend.graph_destroy, self._handle).atexit = False

    def instantiate(self, upload: Any = None, auto_free_on_launch: bool = False, *, use_node_priority: bool = False,
                    device_launch: bool = False, check_hazards: bool = False) -> Any:
        """Create an executable graph.

        Args:
            upload: A Stream to upload the executable graph on right away, or None.
            auto_free_on_launch: Free the graph's unfreed allocations of the previous launch when it is
                launched again (cudaGraphInstantiateFlagAutoFreeOnLaunch).
            use_node_priority: Run kernel nodes at their own priority, not the launch stream's (a captured
                kernel takes its stream's: cudaGraphInstantiateFlagUseNodePriority).
            device_launch: Make it launchable from the device (cudaGraphInstantiateFlagDeviceLaunch): the graph
                holds only kernel, memcpy, memset and child-graph nodes, on one device. Each change of the
                executable graph (setters, set_enabled, update) uploads it again, as kernels launch it as last
                uploaded: should that fail, the change stays, the call raises GraphError, and kernels launch it as
                last uploaded until its next launch, change or kernel argument uploads it.
            check_hazards: Refuse a graph with missing edges (``Graph.hazards``); ``$GPUGRAPH_CHECK_HAZARDS=1`` (read
                when gpugraph is imported) checks every instantiate.

        Raises:
            GraphInstantiateError: The graph breaks a rule of instantiation; ``node`` names the node at fault.
            HazardError: ``check_hazards`` found missing edges: the message names the first, ``hazards`` lists all.

        ``GraphExec.flags`` reads the flags back. See also: cudaGraphInstantiateWithParams.
        """
        flags = instantiate_flags(auto_free_on_launch, device_launch, use_node_priority)
        if self._dead is not None:
            raise GraphError(f"instantiate: {self._dead}")
        if self._in_body():
            raise GraphError(f"instantiate: this graph is a body of a conditional node of {self._owner!r}; it "
                             f"belongs to that node and cannot be instantiated alone (CUDA refuses it)")
        if self._owner is not None:
            raise GraphError(f"instantiate: this graph is the one embedded in a child-graph node of {self._owner!r}; "
                             f"it belongs to that node and cannot be instantiated (CUDA refuses it); "
                             f"instantiate a copy made with .clone() instead")
        if self._memory and len(self._live_execs):
            raise GraphError("instantiate: a graph with allocation or free nodes may have only one "
                             "executable graph at a time; close the other one first")
        if upload is not None:
            check_stream(upload, self.device, "instantiate", "upload")
        conditional = self._holds(NodeKind.CONDITIONAL)
        if conditional or self._conditions:  # (CUDA refuses an unused condition with no conditional node too)
            self._check_conditional_instantiate()
        if device_launch:
            check_device_launch(self)
        if HOST_THREADS:
            refuse_in_host_function("Graph.instantiate")
        _hazards.at_instantiate(self, check_hazards)
        _capture_rules.forbid_unsafe("Graph.instantiate", _capture_rules.INSTANTIATE_RULE)
        exe = GraphExec(self, flags, Graph)
        if self._memory or conditional:
            self._live_execs.add(exe)
        if conditional:  # (its bodies may change later: the executable graph keeps what they are now)
            take_layout(exe)
        if upload is not None:
            try:
                exe.upload(upload)
            except BaseException:
                exe.close()
                raise
        return exe

    def __repr__(self) -> str:
        if self._dead is not None:
            return f"Graph(device={self.device}, removed with the node that embedded it)"
        return f"Graph(device={self.device}, nodes={len(self)})"


# (Graph's own class attribute, which its base GraphState declares and reads: _wrap makes Graphs, never a subclass.)
Graph._made = Graph
_capture.graph_type = Graph  # (a capture makes and records into Graphs: see gpugraph._capture)
