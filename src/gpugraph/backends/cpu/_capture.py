"""Capture mechanics of the CPU backend: each capturing stream has a frontier of nodes, and work
enqueued on it becomes a node depending on that frontier (the rules live in gpugraph._capture_rules)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

from ._graphs import CpuGraph, CpuNode

_ids = itertools.count(1)


class CpuCapture:
    """One capture: the graph it records into and the frontier of every stream taking part (the front end's
    Capture holds it, and passes it with the calls of those streams: the streams keep no capture)."""

    __slots__ = ("graph", "origin", "active", "frontiers", "kinds", "lock", "id")

    def __init__(self, graph: CpuGraph, origin: Any) -> None:
        self.id = next(_ids)  # unique in the process, as CUDA's capture ids are
        self.graph = graph
        self.origin = origin
        self.active = False  # it records work (between begin and end)
        self.frontiers: dict[Any, list[CpuNode]] = {}
        # The kinds of the edges the next work of a stream gets from its frontier, for a stream whose frontier
        # ``set_frontier`` gave kinds (cudaStreamUpdateCaptureDependencies' edge data): used once, by that work.
        self.kinds: dict[Any, list[str]] = {}
        # Held while work is recorded and while the capture ends: work enqueued on another thread as the
        # capture ends is recorded before the end, or runs uncaptured after it (as on CUDA).
        self.lock = threading.RLock()

    def begin(self, deps: list[CpuNode]) -> None:
        self.frontiers[self.origin] = deps
        self.active = True

    def record(self, stream: Any, params: Any, alloc: Any = None, attributes: Any = None) -> bool:
        """Add a node after ``stream``'s frontier (with KernelAttributes ``attributes``, if not None) and make it the
        new frontier; False (nothing added) if the capture has ended meanwhile (on another thread): the work then
        runs as uncaptured work does."""
        with self.lock:
            if not self.active:
                return False
            frontier = self.frontiers[stream]
            node = self.graph.add(params, frontier, alloc)
            if attributes is not None:
                node.attributes = attributes
            kinds = self.kinds.pop(stream, None)
            if kinds is not None:
                node.kinds = {dep: kind for dep, kind in zip(frontier, kinds) if kind != "full"}
            self.frontiers[stream] = [node]
            return True

    def set_frontier(self, stream: Any, deps: list[CpuNode], kinds: list[str] | None) -> None:
        """Make ``deps`` the frontier of ``stream``, the next work's edges from them of ``kinds`` (None: full)."""
        with self.lock:
            if kinds is None or all(kind == "full" for kind in kinds):
                self.kinds.pop(stream, None)
            else:
                self.kinds[stream] = kinds
            self.frontiers[stream] = deps

    def fork_or_join(self, stream: Any, nodes: list[CpuNode]) -> bool:
        """``stream`` waits for ``nodes`` (a captured event): it joins the capture or merges frontiers; False
        if the capture has ended."""
        with self.lock:
            if not self.active:
                return False
            frontier = self.frontiers.get(stream)
            self.kinds.pop(stream, None)  # (the front end takes no wait while a frontier has kinds)
            # (One store, last: an exception (KeyboardInterrupt) comes before the change or after it.)
            self.frontiers[stream] = (list(nodes) if frontier is None
                                      else frontier + [n for n in nodes if n not in frontier])
            return True

    def end(self) -> CpuGraph:
        """No stream records into the capture any more: one store, so it cannot be half done."""
        with self.lock:
            self.active = False
        return self.graph
