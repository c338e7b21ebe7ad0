"""GraphConditional: conditional nodes: the Conditions they read (``Graph.condition``), ``add_if``,
``add_while`` and ``add_switch``, and the rules CUDA applies to them at instantiation.

The rules a body's own nodes obey (what a body may hold, which Conditions its kernels may take) apply to every
node added or changed, so they are ``GraphState``'s; so is making the Graphs over a node's bodies
(``GraphState._body_graphs``), which executable graphs and updates ask for too (``_graph_reads.embedded_graphs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._conditions import Condition, set_reader
from ._errors import GraphError
from ._graph_node import Node
from ._graph_state import GraphState
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._nodes import ConditionalParams
from ._scalars import as_bool, as_int, describe

# The most bodies a SWITCH node has (add_switch), on every backend. CUDA documents no maximum (the node's size is
# an unsigned int, "any value greater than zero"), so this bound is gpugraph's: thousands of branches are a table
# for a kernel to index, not bodies, and each body is a graph to make. tools/probes/gpu_probe_switch_limit.py
# measures what the driver accepts: no refusal up to 4,194,304 bodies (H100, driver 580.159.04, 2026-12-07).
MAX_SWITCH_BODIES = 4096


class GraphConditional(GraphState):
    """Conditional nodes and their bodies (a mixin of Graph: no state of its own)."""

    __slots__ = ()

    def condition(self, default: int = 0, reset: bool = True) -> Condition:
        """A new Condition for a conditional node of this graph or of one of its bodies; kernels of the graph set
        its value on the device (``cudaGraphSetConditional``).

        Args:
            default: The value each launch starts with when ``reset`` (an unsigned 32-bit int).
            reset: Start each launch with ``default``; when False, a kernel must set the value before the
                conditional node reads it (CUDA leaves it undefined at a launch's start).

        See also: cudaGraphConditionalHandleCreate (cudaGraphCondAssignDefault for ``reset``).
        """
        if not isinstance(default, (int, np.integer)) or isinstance(default, bool):
            raise TypeError(f"condition(default): expected an int, got {default!r} ({type(default).__name__})")
        if not 0 <= default < 2**32:
            raise ValueError(f"condition(default): a condition's value is an unsigned 32-bit int; got {default}")
        if as_bool(reset) is None:
            raise TypeError(f"condition(reset): expected a bool, got {describe(reset)}")
        reset = bool(reset)
        if HOST_THREADS:
            refuse_in_host_function("Graph.condition")
        with self._lock:
            handle, value = self._backend.graph_condition(self._handle, int(default), reset)
            condition = Condition(self, int(default), reset, handle, value)
            self._conditions.append(condition)
        return condition

    def add_if(self, condition: Condition, has_else: bool = False, after: Any = ()) -> Node:
        """Add a node that runs its first body when ``condition``'s value is not 0 and, with ``has_else``, its
        second when it is 0. Fill the bodies through ``node.bodies``.

        See also: cudaGraphAddNode with cudaGraphCondTypeIf (size 2 for an else: CUDA 12.8).
        """
        if as_bool(has_else) is None:
            raise TypeError(f"add_if(has_else): expected a bool, got {describe(has_else)}")
        return self._add_conditional("if", condition, 2 if has_else else 1, after)

    def add_while(self, condition: Condition, after: Any = ()) -> Node:
        """Add a node that runs its body again and again while ``condition``'s value is not 0, checked before
        each run: a kernel of the body (or before the node) sets it to 0 to stop. Fill the body through
        ``node.bodies[0]``.

        See also: cudaGraphAddNode with cudaGraphCondTypeWhile.
        """
        return self._add_conditional("while", condition, 1, after)

    def add_switch(self, condition: Condition, count: int, after: Any = ()) -> Node:
        """Add a node with ``count`` bodies (1 to ``gg.MAX_SWITCH_BODIES``) that runs body ``n`` when ``condition``'s
        value is ``n`` (none when it is ``count`` or more). Fill the bodies through ``node.bodies``.

        Raises:
            TypeError: If ``count`` is not an int (a NumPy integer too; not a bool).
            ValueError: If ``count`` is below 1 or above ``gg.MAX_SWITCH_BODIES``.

        See also: cudaGraphAddNode with cudaGraphCondTypeSwitch (CUDA 12.8).
        """
        number = as_int(count)
        if number is None:
            raise TypeError(f"add_switch(count): expected a positive int (the number of bodies), got {describe(count)}")
        if not 1 <= number <= MAX_SWITCH_BODIES:
            more = "; for more cases, let one body's kernel choose by the value" if number > MAX_SWITCH_BODIES else ""
            raise ValueError(f"add_switch(count): expected a positive int of at most {MAX_SWITCH_BODIES} "
                             f"(gg.MAX_SWITCH_BODIES, the bodies a SWITCH node may have), got {count!r}{more}")
        return self._add_conditional("switch", condition, number, after)

    def _add_conditional(self, kind: str, condition: object, count: int, after: Any) -> Node:
        what = f"add_{kind}"
        if type(condition) is not Condition:
            raise TypeError(f"{what}(condition): expected a Condition (Graph.condition), "
                            f"got {type(condition).__name__}")
        self._check_condition(condition, what)
        if condition.node is not None:
            raise GraphError(f"{what}: {condition!r} is read by {condition.node!r} already; a condition belongs to "
                             f"one conditional node (make another with Graph.condition)")
        node = self._add(ConditionalParams(kind, condition, (None,) * count), after, what)
        set_reader(condition, node)
        self._body_graphs(node)
        return node

    def _check_conditional_instantiate(self) -> None:
        """The rules CUDA applies at the instantiation of a graph with conditional nodes."""
        if len(self._live_execs):
            raise GraphError("instantiate: a graph with conditional nodes may have only one executable graph at a "
                             "time (CUDA refuses another); close the other one first")
        pending: list[GraphConditional] = [self]
        for graph in pending:  # (each graph's bodies after it: no recursion however deep they nest)
            pending.extend(graph._check_conditions_read())

    def _check_conditions_read(self) -> list[GraphConditional]:
        """Refuse a Condition this graph made that no conditional node reads; return the graph's bodies."""
        for condition in self._conditions:
            if condition.node is None:
                raise GraphError(f"instantiate: {condition!r}, made by {self!r}, is read by no conditional "
                                 f"node (CUDA refuses a graph with an unused condition)")
        return [body for bodies in self._bodies.values() for body in bodies]
