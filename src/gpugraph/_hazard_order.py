"""The order a graph's edges give its nodes, for the check for missing edges (``_hazards``): the graph and the graphs
its nodes embed flattened into one acyclic graph of vertices, and whether a path of edges leads from one node to
another.

The flattening: a child-graph or conditional node is two vertices, its start and its end, with what it embeds between
them (each of its nodes after the start and before the end); a conditional node's bodies come one after another
between them, so that the nodes of two bodies, which never run together, are ordered. A node is ordered before another
where a path of vertices leads from it to the other: the order its graph's edges give it, or those of the node that
embeds its graph.

What answering costs grows with the graph's vertices and edges: the vertices in a topological order (the order they
were added where the edges allow it); each vertex's ancestors among the ``WINDOW`` vertices before it, as a bitset;
the vertices split into chains (paths of edges: a vertex reaches every later one of its chain); the runs of single
edges out of and into each vertex. Two vertices farther apart: past those runs, a search from both of a few edges,
else labels of chains the search reached (for each vertex, the last of the chain's vertices that reaches it, or the
first that it reaches): one pass over the graph for each chain that queries need, made the first time.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Any, Protocol

from ._nodes import NodeKind

# Vertices before each one whose order with it its bitset holds (farther ones: a search, else chains' labels).
WINDOW = 1024
# Edges a search for a path between two vertices far apart follows from each end before it leaves them to labels.
SEARCH = 64
# What ``Flat.relation`` says of two nodes.
BEFORE, AFTER, APART = 1, 2, 0


class CheckedNode(Protocol):
    """What the check reads of a node (a gpugraph Node; by this protocol the check stays below the graph modules)."""

    @property
    def kind(self) -> NodeKind: ...

    @property
    def params(self) -> Any: ...

    @property
    def bodies(self) -> tuple[CheckedGraph, ...]: ...


class CheckedGraph(Protocol):
    """What the check reads of a graph (a Graph, or the graph of a child-graph node or a body)."""

    @property
    def nodes(self) -> tuple[CheckedNode, ...]: ...

    @property
    def edges(self) -> tuple[tuple[CheckedNode, CheckedNode], ...]: ...


class Flat:
    """The nodes of a graph and of the graphs its nodes embed, numbered in one order (each embedding node followed by
    what it embeds, so that a node and its contents are one run of numbers), with the order its edges give."""

    def __init__(self, graph: CheckedGraph) -> None:
        self.nodes: list[CheckedNode] = []
        self.parent: list[int] = []  # the number of the node embedding each one, -1 for the graph's own
        preds: list[list[int]] = []  # per vertex (numbered as made), the vertices just before it
        starts: list[int] = []  # per node, its (start) vertex
        self._walk(graph, -1, -1, preds, starts)
        order = _topological(preds)
        if any(v != t for t, v in enumerate(order)):  # (from here on a vertex is its place in the order)
            rank = [0] * len(order)
            for t, v in enumerate(order):
                rank[v] = t
            preds, starts = [[rank[p] for p in preds[v]] for v in order], [rank[v] for v in starts]
        self._preds, self._at = preds, starts  # (_at: per node, its vertex)
        self._chain = _chains(self._preds)  # per vertex, the first vertex of its chain
        self._links: dict[int, list[int]] = {}  # chain -> its vertices, in order
        for t, chain in enumerate(self._chain):
            self._links.setdefault(chain, []).append(t)
        self._window = _windows(self._preds)
        self._succs: list[list[int]] = [[] for _ in order]
        for t, ps in enumerate(self._preds):
            for p in ps:
                self._succs[p].append(t)
        self._out, self._in = _Runs(self._succs), _Runs(self._preds)
        self._lasts: dict[int, list[int]] = {}  # chain -> per vertex, the last of the chain's vertices reaching it
        self._firsts: dict[int, list[int]] = {}  # chain -> per vertex, the first of them it reaches

    def _walk(self, graph: CheckedGraph, parent: int, start: int, preds: list[list[int]],
              starts: list[int]) -> list[int]:
        """Number ``graph``'s nodes and theirs, each after vertex ``start`` (-1: none); the vertices they end at."""
        ends: dict[CheckedNode, tuple[int, int]] = {}  # node -> its start and end vertices
        for node in graph.nodes:
            g = len(self.nodes)
            self.nodes.append(node)
            self.parent.append(parent)
            vertex = end = len(preds)
            preds.append([start] if start >= 0 else [])
            starts.append(vertex)
            if node.kind is NodeKind.GRAPH or node.kind is NodeKind.CONDITIONAL:
                # (A conditional node's bodies one after another: they never run together.)
                for body in (node.params.graph,) if node.kind is NodeKind.GRAPH else node.bodies:
                    last = self._walk(body, g, end, preds, starts)
                    preds.append([end, *last])  # (after the body's start too: a body may be empty)
                    end = len(preds) - 1
            ends[node] = (vertex, end)
        for a, b in graph.edges:
            preds[ends[b][0]].append(ends[a][1])
        return [end for _, end in ends.values()]

    def top(self, g: int) -> int:
        """The node of the graph itself that is ``g`` or embeds it."""
        while self.parent[g] >= 0:
            g = self.parent[g]
        return g

    def edge(self, x: int, y: int) -> tuple[int, int]:
        """The nodes of one graph whose edge would order ``x`` and ``y`` (themselves, or what embeds them), the one made
        first first."""
        chain = {}  # the embedding node -> the node of its graph that is x or embeds x
        while x >= 0:
            chain[self.parent[x]] = x
            x = self.parent[x]
        while self.parent[y] not in chain:
            y = self.parent[y]
        x = chain[self.parent[y]]
        return (x, y) if x < y else (y, x)

    def inside(self, g: int) -> tuple[CheckedNode, ...]:
        """The nodes embedding node ``g``'s graph, innermost first."""
        chain = []
        parent = self.parent[g]
        while parent >= 0:
            chain.append(self.nodes[parent])
            parent = self.parent[parent]
        return tuple(chain)

    def path(self, a: int, b: int) -> bool:
        """Whether node ``a`` is ordered before node ``b`` (or is ``b``)."""
        return self._reaches(self._at[a], self._at[b])

    def vertex(self, g: int) -> int:
        """Node ``g``'s vertex (its start, for a node embedding a graph)."""
        return self._at[g]

    def relation(self, x: int, y: int) -> int:
        """BEFORE where vertex ``x`` reaches vertex ``y`` (or is it), AFTER where ``y`` reaches ``x``, else APART."""
        if x <= y:
            return BEFORE if self._reaches(x, y) else APART
        return AFTER if self._reaches(y, x) else APART

    def anchor(self, xs: list[int], y: int) -> int:
        """The first vertex of ``y``'s chain that each vertex of ``xs`` reaches (each reaches ``y``): found by halves,
        as a vertex that reaches one of the chain reaches every later one."""
        links = self._links[self._chain[y]]
        low, high = bisect.bisect_left(links, max(xs)), bisect.bisect_left(links, y)  # (none is before the last of xs)
        while low < high:
            middle = (low + high) // 2
            for x in xs:
                if not self._reaches(x, links[middle]):
                    low = middle + 1
                    break
            else:
                high = middle
        return links[low]

    def _reaches(self, x: int, y: int) -> bool:
        """Whether vertex ``x`` reaches vertex ``y`` (or is it). For two far apart: past the runs of single edges out
        of ``x`` and into ``y`` (every path between them follows both), then by the labels of one's chain where it has
        them, else by a short search, else by the labels of the chains of the vertices the search reached (every path
        from ``x`` to ``y`` passes one that it reached from ``x``, and one that it reached from ``y``)."""
        found = self._near(x, y)
        if found is None:
            if self._out.passes(x, y) or self._in.passes(y, self._out.end[x]):
                return True
            x, y = self._out.end[x], self._in.end[y]
            found = self._near(x, y)
        if found is not None:
            return found
        if self._chain[x] in self._lasts:
            return self._lasts[self._chain[x]][y] >= x
        if self._chain[y] in self._firsts:
            return self._firsts[self._chain[y]][x] <= y
        searched = self._search(x, y)
        if isinstance(searched, bool):
            return searched
        ahead: dict[int, int] = {}  # chain -> the first of its vertices reached from x
        for v in searched[0]:
            ahead[self._chain[v]] = min(v, ahead.get(self._chain[v], v))
        behind: dict[int, int] = {}  # chain -> the last of its vertices reaching y
        for v in searched[1]:
            behind[self._chain[v]] = max(v, behind.get(self._chain[v], v))
        # (Of the two, the one with fewer chains still without labels.)
        if sum(c not in self._lasts for c in ahead) <= sum(c not in self._firsts for c in behind):
            return any(self._last(c)[y] >= v for c, v in ahead.items())
        return any(self._first(c)[x] <= v for c, v in behind.items())

    def _near(self, x: int, y: int) -> bool | None:
        """Whether vertex ``x`` reaches vertex ``y`` (or is it), where their order, their chain or ``y``'s bitset
        answers; else None."""
        if x >= y:
            return x == y
        if self._chain[x] == self._chain[y]:  # (a chain is a path)
            return True
        if y - x < WINDOW:
            return bool(self._window[y] >> (y - x) & 1)
        return None

    def _search(self, x: int, y: int) -> bool | tuple[list[int], list[int]]:
        """Whether vertex ``x`` reaches vertex ``y`` (``x`` before ``y``), found by a search from both, breadth first,
        each side following at most SEARCH edges: forward from ``x``, backward from ``y``, each stopping at the
        vertices near enough to the other end for its bitset, or on its chain, to answer. Where it finds neither:
        the vertices each side reached but did not follow, in the order found."""
        chains, window = self._chain, self._window
        ahead, behind = [x], [y]  # the vertices reached from x (in the order found); those reaching y
        seen_ahead, seen_behind = {x}, {y}
        i = j = 0  # the next of each to follow
        left = [SEARCH, SEARCH]  # the edges each side may still follow
        while True:
            moved = False
            if i < len(ahead) and len(self._succs[ahead[i]]) <= left[0]:
                succs, moved = self._succs[ahead[i]], True
                i, left[0] = i + 1, left[0] - len(succs)
                for s in succs:
                    if s in seen_behind or (s <= y and (chains[s] == chains[y] or (
                            y - s < WINDOW and window[y] >> (y - s) & 1))):
                        return True
                    if s < y and y - s >= WINDOW and s not in seen_ahead:
                        seen_ahead.add(s)
                        ahead.append(s)
            if j < len(behind) and len(self._preds[behind[j]]) <= left[1]:
                preds, moved = self._preds[behind[j]], True
                j, left[1] = j + 1, left[1] - len(preds)
                for p in preds:
                    if p in seen_ahead or (p >= x and (chains[p] == chains[x] or (
                            p - x < WINDOW and window[p] >> (p - x) & 1))):
                        return True
                    if p > x and p - x >= WINDOW and p not in seen_behind:
                        seen_behind.add(p)
                        behind.append(p)
            if i == len(ahead) or j == len(behind):
                return False  # (all that one side reaches is found: the other end is not among it)
            if not moved:
                return ahead[i:], behind[j:]

    def _last(self, chain: int) -> list[int]:
        """Per vertex, the last vertex of ``chain`` that reaches it (-1 for none): one pass in order from its first."""
        labels = self._lasts.get(chain)
        if labels is None:
            labels = self._lasts[chain] = [-1] * len(self._preds)
            chains = self._chain
            for t in range(chain, len(labels)):
                best = t if chains[t] == chain else -1
                if best < 0:
                    for p in self._preds[t]:
                        if labels[p] > best:
                            best = labels[p]
                labels[t] = best
        return labels

    def _first(self, chain: int) -> list[int]:
        """Per vertex, the first vertex of ``chain`` that it reaches (the number of vertices for none): one pass
        against the order."""
        labels = self._firsts.get(chain)
        if labels is None:
            n = len(self._preds)
            labels = self._firsts[chain] = [n] * n
            chains = self._chain
            for t in range(n - 1, -1, -1):
                best = t if chains[t] == chain else n
                if best == n:
                    for s in self._succs[t]:
                        if labels[s] < best:
                            best = labels[s]
                labels[t] = best
        return labels


class _Runs:
    """Runs of single edges: the forest where each vertex with exactly one next vertex (its one successor, or its one
    predecessor) hangs from it; per vertex, the vertex its run ends at, and where its subtree lies in a numbering in
    depth-first order."""

    def __init__(self, nexts: list[list[int]]) -> None:
        n = len(nexts)
        parent = [ns[0] if len(ns) == 1 else -1 for ns in nexts]
        children: list[list[int]] = [[] for _ in range(n)]
        for v, p in enumerate(parent):
            if p >= 0:
                children[p].append(v)
        self.end, self._low, self._high = [0] * n, [0] * n, [0] * n
        count = 0
        for root in range(n):
            if parent[root] >= 0:
                continue
            stack = [root]
            while stack:
                v = stack.pop()
                if v < 0:  # (leaving ~v: its subtree is numbered)
                    self._high[~v] = count
                    continue
                self.end[v], self._low[v] = root, count
                count += 1
                stack.append(~v)
                stack.extend(children[v])

    def passes(self, v: int, u: int) -> bool:
        """Whether the run from vertex ``v`` passes vertex ``u`` (or is ``u``)."""
        return self._low[u] <= self._low[v] < self._high[u]


def _topological(preds: list[list[int]]) -> list[int]:
    """The vertices in a topological order: of those whose predecessors are placed, the first made first (Kahn's; the
    edges are acyclic, checked when added)."""
    n = len(preds)
    if all(p < v for v, ps in enumerate(preds) for p in ps):
        return list(range(n))  # (the order they were made, as every edge points forward)
    succs: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(p) for p in preds]
    for v, ps in enumerate(preds):
        for p in ps:
            succs[p].append(v)
    ready = [v for v in range(n) if not waiting[v]]
    order = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in succs[v]:
            waiting[w] -= 1
            if not waiting[w]:
                heapq.heappush(ready, w)
    return order


def _chains(preds: list[list[int]]) -> list[int]:
    """Per vertex (in topological order), the first vertex of its chain: a vertex continues the chain of its latest
    predecessor that no other vertex continues yet, else starts one."""
    chain = list(range(len(preds)))
    continued = [False] * len(preds)
    for t, ps in enumerate(preds):
        best = -1
        for p in ps:
            if p > best and not continued[p]:
                best = p
        if best >= 0:
            continued[best] = True
            chain[t] = chain[best]
    return chain


def _windows(preds: list[list[int]]) -> list[int]:
    """Per vertex (in topological order), the bitset of its ancestors among the WINDOW vertices before it, itself
    included: bit d for the vertex d places before it."""
    mask = (1 << WINDOW) - 1
    windows: list[int] = []
    for t, ps in enumerate(preds):
        bits = 1
        for p in ps:
            if t - p < WINDOW:
                bits |= windows[p] << (t - p)
        windows.append(bits & mask)
    return windows
