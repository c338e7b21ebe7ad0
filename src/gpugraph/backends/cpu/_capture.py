"""Capture mechanics of the CPU backend: each capturing stream has a frontier of nodes, and work
enqueued on it becomes a node depending on that frontier (the rules live in gpugraph._capture)."""

from __future__ import annotations

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
        if stream.capture is None:
            stream.capture = self
            self.frontiers[stream] = list(nodes)
        else:
            frontier = self.frontiers[stream]
            frontier.extend(n for n in nodes if n not in frontier)

    def end(self) -> CpuGraph:
        """Take every stream out of the capture; an exception midway (KeyboardInterrupt) finishes first."""
        try:
            self._leave()
        except BaseException:
            self._leave()
            raise
        return self.graph

    def _leave(self) -> None:
        self.active = False
        for stream in self.frontiers:
            stream.capture = None
