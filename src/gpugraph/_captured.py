"""``@captured``: call a function once to capture it, then replay the graph (AMDGPU.jl's @captured).

A call's key is made from its arguments: Arrays by shape, dtype, device and address; scalars and other
hashable values by value; arguments named in ``dynamic`` by type only. On a call:

* the same key replays the executable graph, after setting each dynamic argument's Param (patching just
  the nodes that take it, never recapturing);
* a new key captures the function again; if an executable graph of the same topology is cached, it is
  updated in place (no new instantiation), otherwise the new graph is instantiated, and the least
  recently used one is dropped beyond ``max_graphs``.

The function must enqueue its work on ``current_stream()``; while it is captured that is the capture's
stream, and work it enqueues on another stream of the device (one it was given or closed over) raises
CaptureError, since it would run once at the capture and never be part of the graph. Memory it allocates
there becomes graph memory, instantiated with auto-free on launch: its address is the same at every
replay (the returned Arrays stay valid until the next call), and it is freed when the graph leaves the
cache (``clear()`` empties it). The function's Python code runs only when it is captured, and the value
it returns then is what every replay returns.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _capture
from ._current import current_stream, use_stream
from ._errors import GraphUpdateError
from ._memory import Array
from ._params import Param
from ._update import GraphLayout


@dataclass
class CapturedStats:
    """What a captured function has done: captures, in-place updates, instantiations, replays, patches
    (dynamic arguments set on a replay), evictions (graphs dropped from the cache)."""

    captures: int = 0
    updates: int = 0
    instantiations: int = 0
    replays: int = 0
    patches: int = 0
    evictions: int = 0


class _Entry:
    """A cached graph: its executable graph, its Params, its allocations and the value it returns."""

    def __init__(self, graph: Any, exe: Any, params: dict[str, Param], allocations: list[Array],
                 result: Any) -> None:
        self.graph, self.exe, self.params, self.allocations, self.result = graph, exe, params, allocations, result
        self.topology = _topology(graph)

    def close(self, stream: Any) -> None:
        """Release the executable graph and free the graph memory it left allocated."""
        self.exe.close()
        for array in self.allocations:
            if array._alloc.live:
                stream.free(array)


def _topology(graph: Any) -> tuple:
    layout = GraphLayout(graph)
    return tuple(zip(layout.kinds, layout.deps))


def _key_part(name: str, value: Any, dynamic: bool) -> Any:
    if type(value) is Array:
        where = (value.shape, value.dtype.str, str(value.device))
        return ("array", *where) if dynamic else ("array", *where, value.ptr)
    if dynamic:
        return ("scalar", type(value).__name__, getattr(value, "dtype", None))
    if isinstance(value, (int, float, bool, str, bytes, np.generic, type(None))):
        return ("value", type(value).__name__, value)
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return ("hashable", value)


@contextlib.contextmanager
def _function_capture(cap: Any) -> Iterator[None]:
    """Mark this thread as capturing a captured function, so work it enqueues on other streams is refused."""
    me = threading.get_ident()
    outer = _capture.function_captures.get(me)
    _capture.function_captures[me] = cap
    try:
        yield
    finally:
        if outer is None:
            del _capture.function_captures[me]
        else:
            _capture.function_captures[me] = outer


class CapturedFunction:
    """A function wrapped by ``captured``; call it like the function. See the module docstring."""

    def __init__(self, fn: Callable[..., Any], dynamic: tuple[str, ...], max_graphs: int, mode: str) -> None:
        if not callable(fn):
            raise TypeError(f"captured: expected a function, got {type(fn).__name__}")
        if isinstance(max_graphs, bool) or not isinstance(max_graphs, int) or max_graphs < 1:
            raise ValueError(f"captured(max_graphs): expected an int of at least 1, got {max_graphs!r}")
        self._fn = fn
        self._signature = inspect.signature(fn)
        unknown = [name for name in dynamic if name not in self._signature.parameters]
        if unknown:
            raise ValueError(f"captured(dynamic): {fn.__qualname__} has no parameter {', '.join(map(repr, unknown))} "
                             f"(parameters: {', '.join(self._signature.parameters)})")
        self._dynamic = frozenset(dynamic)
        self._max_graphs = max_graphs
        self._mode = mode
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._capture_streams: dict[Any, Any] = {}
        self.stats = CapturedStats()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        device = next((v.device for v in arguments.values() if type(v) is Array), None)
        stream = current_stream(device)
        key = tuple((name, _key_part(name, value, name in self._dynamic)) for name, value in arguments.items())
        entry = self._cache.get(key)
        if entry is None:
            entry = self._capture(key, bound, stream)
        else:
            self._cache.move_to_end(key)
            for name, param in entry.params.items():
                value = arguments[name]
                if value is not param.value and (type(value) is Array or value != param.value):
                    param.value = value
                    self.stats.patches += 1
            self.stats.replays += 1
        entry.exe.launch(stream)
        return entry.result

    def _capture(self, key: tuple, bound: inspect.BoundArguments, stream: Any) -> _Entry:
        params = {name: Param(bound.arguments[name]) for name in self._dynamic}
        call = inspect.BoundArguments(self._signature, dict(bound.arguments, **params))
        capture_stream = self._capture_streams.get(stream.device)
        if capture_stream is None:
            capture_stream = self._capture_streams[stream.device] = stream.device.stream()
        capture_stream.wait(stream.record())  # the captured work follows what the caller enqueued
        with use_stream(capture_stream), capture_stream.capture(mode=self._mode) as cap:
            with _function_capture(cap):
                result = self._fn(*call.args, **call.kwargs)
        self.stats.captures += 1
        graph = cap.graph
        entry = self._update_cached(graph, key, params, cap.allocations, result)
        if entry is None:
            exe = graph.instantiate(auto_free_on_launch=True)
            self.stats.instantiations += 1
            entry = _Entry(graph, exe, params, cap.allocations, result)
            self._cache[key] = entry
            while len(self._cache) > self._max_graphs:
                _, old = self._cache.popitem(last=False)
                old.close(stream)
                self.stats.evictions += 1
        return entry

    def _update_cached(self, graph: Any, key: tuple, params: dict[str, Param], allocations: list[Array],
                       result: Any) -> _Entry | None:
        """Update a cached executable graph of the same topology in place, re-keyed to ``key``."""
        if graph._memory:
            return None
        topology = _topology(graph)
        for old_key, entry in reversed(self._cache.items()):
            if entry.topology != topology:
                continue
            try:
                entry.exe.update(graph)
            except GraphUpdateError:
                continue
            del self._cache[old_key]
            entry.graph, entry.params, entry.allocations, entry.result = graph, params, allocations, result
            self._cache[key] = entry
            self.stats.updates += 1
            return entry
        return None

    def clear(self) -> None:
        """Drop every cached graph and free the graph memory they hold."""
        while self._cache:
            _, entry = self._cache.popitem(last=False)
            entry.close(current_stream(entry.exe.device))

    def __repr__(self) -> str:
        return f"captured({self._fn.__qualname__}, {len(self._cache)} graphs cached)"


def captured(fn: Callable[..., Any] | None = None, *, dynamic: tuple[str, ...] | list[str] = (),
             max_graphs: int = 16, mode: str = "global") -> Any:
    """Capture a function into a graph on its first call and replay it afterwards (module docstring).

    Args:
        fn: The function; it enqueues its GPU work on ``gg.current_stream()``.
        dynamic: Names of arguments that change from call to call without a new capture: they are
            passed to the function's kernels as Params and patched on replay.
        max_graphs: How many graphs of different topologies to keep (least recently used dropped).
        mode: The capture mode ("global", "thread_local" or "relaxed").

    Returns:
        A CapturedFunction (or a decorator making one, when called with options only).
    """
    if isinstance(dynamic, str):
        dynamic = (dynamic,)
    if fn is None:
        return lambda f: CapturedFunction(f, tuple(dynamic), max_graphs, mode)
    return CapturedFunction(fn, tuple(dynamic), max_graphs, mode)
