"""Conditions: the values that conditional nodes read, set on the device by kernels of the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._graph_reads import GraphFields


class Condition:
    """The value a conditional node of a graph reads (CUDA's conditional handle), made by ``Graph.condition``.

    Pass it to a kernel of the graph (or of one of its bodies) for a ``cudaGraphConditionalHandle`` parameter;
    the kernel sets the value with ``cudaGraphSetConditional(handle, value)``. Give it to exactly one
    conditional node (``Graph.add_if``, ``add_while``, ``add_switch``) of the graph that made it or of one of
    that graph's bodies.

    Attributes:
        graph: The Graph that made it.
        node: The conditional node that reads it (None until one does).
        default: The value it takes at the start of each launch when ``reset`` is True.
        reset: Whether each launch starts with ``default``; when False, a kernel of the graph must set the
            value before the conditional node reads it (CUDA leaves it undefined at each launch).
    """

    __slots__ = ("graph", "default", "reset", "_handle", "_value", "_node", "__weakref__")

    def __init__(self, graph: GraphFields[Any], default: int, reset: bool, handle: Any, value: int) -> None:
        self.graph: Any = graph  # (a Graph: not named here, since gpugraph._graph sits above this module)
        self.default = default
        self.reset = reset
        self._handle = handle  # the backend's
        self._value = value  # what kernels are passed for it: the backend's handle (CUDA's, or the CPU backend's)
        self._node: Any = None  # the conditional node that reads it, once given to one

    def __repr__(self) -> str:
        return f"Condition(default={self.default}, reset={self.reset})"

    @property
    def node(self) -> Any:
        """The conditional node that reads it, or None while none does (a condition belongs to one)."""
        return self._node


def set_reader(condition: Condition, node: object) -> None:
    """Note that conditional node ``node`` reads ``condition`` (None: the node that read it was removed)."""
    condition._node = node


def condition_args(args: tuple) -> list[Condition]:
    """The Conditions among a kernel's arguments."""
    return [a for a in args if type(a) is Condition]


def condition_handle(condition: Condition) -> Any:
    """The backend's handle of ``condition``: what a backend's conditional node and kernels set it through."""
    return condition._handle


def condition_value(condition: Condition) -> int:
    """What kernels are passed for ``condition`` (the backend's handle of it, as a number)."""
    return condition._value
