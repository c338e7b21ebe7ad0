"""Capture mechanics of the CPU backend: each capturing stream has a frontier of nodes, and work
enqueued on it becomes a node depending on that frontier (the rules live in gpugraph._capture)."""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any

from ._graphs import CpuGraph, CpuNode


class CpuCapture:
    """One capture sequence: the graph it records into and the frontier of every stream in it."""

    def __init__(self, graph: CpuGraph, origin: Any, deps: list[CpuNode]) -> None:
        self.graph = graph
        self.origin = origin
        self.active = True
        self.frontiers: dict[Any, list[CpuNode]] = {origin: list(deps)}

    def record(self, stream: Any, params: Any, alloc: Any = None) -> CpuNode:
        """Add a node after ``stream``'s frontier and make it the new frontier."""
        node = self.graph.add(params, self.frontiers[stream], alloc)
        self.frontiers[stream] = [node]
        return node

    def fork_or_join(self, stream: Any, nodes: list[CpuNode]) -> None:
        """``stream`` waits for ``nodes`` (a captured event): it joins the capture or merges frontiers."""
        # Each change is made aside and stored last, so an exception (KeyboardInterrupt) comes before it or
        # after it: a stream marked capturing is always one that end() takes out.
        if stream.capture is None:
            self.frontiers[stream] = list(nodes)
            stream.capture = self
        else:
            frontier = self.frontiers[stream]
            self.frontiers[stream] = frontier + [n for n in nodes if n not in frontier]

    def end(self) -> CpuGraph:
        """Take every stream out of the capture, all at once; when an exception (KeyboardInterrupt) stops
        that, it is made again before the exception goes on."""
        self.active = False  # first: an event recorded in the capture no longer forks a stream into it
        try:
            self._leave()
        except BaseException:
            self._leave()
            raise
        return self.graph

    def _leave(self) -> None:
        # One C call makes every stream leave: it runs no Python frame, so no signal handler (Ctrl-C) can
        # raise between two streams leaving, which would leave a forked stream capturing for good.
        deque(map(setattr, self.frontiers, repeat("capture"), repeat(None)), maxlen=0)
