"""CUDA's host-side rules for graph memory at launch, shared by every backend.

Allocation records (``backends._allocation.Allocation``) carry ``ptr``, ``origin`` ("device", "stream" or "graph"),
``live`` (allocated and not yet freed, in submission order) and ``owner`` (a description for messages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import GraphError


class GraphMemoryRules:
    """What one executable graph allocates and frees, checked and applied at each launch."""

    __slots__ = ("allocated", "left_live", "frees_foreign", "auto_free_on_launch")

    def __init__(self, allocated: Sequence[Any], freed: Sequence[Any], auto_free_on_launch: bool) -> None:
        self.allocated = list(allocated)
        self.left_live = [a for a in allocated if a not in freed]  # live after a launch
        self.frees_foreign = [a for a in freed if a not in allocated]  # other graphs' or streams' memory
        self.auto_free_on_launch = auto_free_on_launch

    @classmethod
    def of(cls, allocated: Sequence[Any], freed: Sequence[Any], auto_free_on_launch: bool) -> GraphMemoryRules | None:
        """The rules of a graph, or None when it neither allocates nor frees (nothing to check at launch)."""
        return cls(allocated, freed, auto_free_on_launch) if allocated or freed else None

    def check(self) -> None:
        """Refuse a launch that would leak or double-free graph memory."""
        if not self.auto_free_on_launch:
            for alloc in self.allocated:
                if alloc.live:
                    raise GraphError(
                        f"launch: {alloc.owner} from the previous launch has not been freed; free it "
                        f"(Stream.free or a free node) or instantiate with auto_free_on_launch=True")
        for alloc in self.frees_foreign:
            if not alloc.live:
                raise GraphError(f"launch: the graph frees {alloc.owner}, which is not allocated now "
                                 f"(double free, or freed before it was allocated)")

    def commit(self) -> None:
        """After the launch is enqueued: its allocations are live, the ones it frees are not."""
        for alloc in self.left_live:
            alloc.live = True
        for alloc in self.frees_foreign:
            alloc.live = False
