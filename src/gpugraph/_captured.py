"""``@captured``: call a function once to capture it, then replay the graph (AMDGPU.jl's @captured).

A call's key is made from its arguments: Arrays by shape, dtype, device and address; scalars and other
hashable values by value; lists, tuples, sets and dicts by their items, in order, each keyed as an argument
is; other unhashable objects by identity, the key keeping the object alive (so its id cannot become another
object's while a graph is cached for it); arguments named in ``dynamic`` by type only. On a call:

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

Threads. Calls may come from several threads, each enqueuing on its own current stream. Each thread
captures on a capture stream of its own, so captures in different threads run at once; the cache is shared
and guarded by a lock, under which a call patches its dynamic arguments and enqueues its launch, so a
launch always runs with its own call's values (CUDA orders the launches of one executable graph). A graph
with memory allocated inside is cached per thread: the Arrays a call returns stay valid until that
thread's next call, whatever other threads do (a thread started later never takes over a finished one's
graphs; once a thread has ended, its graphs are kept among the ``max_graphs`` most recently used graphs
of ended threads). The capture mode keeps CUDA's meaning: a ``global`` capture (the default) forbids potentially
unsafe calls (``synchronize``, synchronous allocation and copies, instantiation) in every thread while it
runs, so a thread that makes one while another thread's call captures makes that capture fail with
CaptureError, as CUDA would; programs whose threads synchronize while others may capture should use
``mode="thread_local"``, which forbids them only in the capturing thread. The instantiations (and frees)
that ``captured`` makes itself wait until no other thread's global capture runs
(``gpugraph._capture_rules.unsafe_section``), so its calls from several threads work in every mode.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _capture_rules, _graph_reads, _interrupts
from ._current import current_stream, own_stream, use_stream
from ._errors import GraphUpdateError
from ._exec_state import source_of
from ._memory import Array, allocation_of
from ._params import Param
from ._scalars import as_int, describe
from ._update import GraphLayout

if TYPE_CHECKING:
    from ._exec import GraphExec
    from ._graph import Graph
    from ._stream import Stream


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

    def __init__(self, key: tuple, graph: Graph, exe: GraphExec, params: dict[str, Param], allocations: list[Array],
                 result: Any, owner: _ThreadToken | None = None) -> None:
        self.key, self.graph, self.exe, self.params, self.allocations, self.result = (
            key, graph, exe, params, allocations, result)
        self.owner = owner  # the thread it is cached for alone (a graph with memory), or None: shared
        self.topology = _topology(graph)
        self.stream: Stream | None = None  # the stream of its latest launch, where its graph memory is freed

    def close(self) -> None:
        """Release the executable graph and free the graph memory it left allocated (after its last launch).
        Idempotent: closing again frees nothing twice."""
        self.exe.close()
        stream = self.stream  # (set by each launch: memory is live only once the graph was launched)
        for array in self.allocations:
            if stream is not None and allocation_of(array).live:
                stream.free(array)


def _topology(graph: Graph) -> tuple:
    layout = GraphLayout(graph)
    return tuple(zip(layout.kinds, layout.deps))


class _Identity:
    """An unhashable object's key part: equal only for the same object, which it holds, so that the object's
    id is not given to another object while a key made from it is cached (the new object would replay the old
    one's graph)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Identity and other.value is self.value


def _key_part(value: Any, dynamic: bool, outer: tuple[int, ...] = ()) -> Any:
    """One argument's part of a call's key (with its type: 1, 1.0 and True make different keys). A list,
    tuple, set or dict counts by its items' key parts in their order (an Array in it by its address, as an
    argument); another unhashable object by identity, held by the key. ``outer``: the ids of the containers
    whose items are being keyed (one met again inside itself counts by identity)."""
    kind = type(value)
    if kind is Array:
        return (Array, value.shape, value.dtype, value.device) if dynamic else (
            Array, value.shape, value.dtype, value.device, value.ptr)
    if dynamic:
        return (kind, getattr(value, "dtype", None))
    if isinstance(value, (float, complex, np.inexact)):  # by bits: 0.0 == -0.0, and a NaN equals nothing
        return (kind, np.asarray(value).tobytes())
    if isinstance(value, (int, bool, str, bytes, np.generic, type(None))):
        return (kind, value)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if id(value) in outer:  # in itself: the outer key part already has what it holds
            return _Identity(value)
        outer += (id(value),)
        if isinstance(value, dict):
            return (kind, tuple((_key_part(k, False, outer), _key_part(v, False, outer)) for k, v in value.items()))
        return (kind, tuple(_key_part(item, False, outer) for item in value))
    try:
        hash(value)
    except TypeError:
        return _Identity(value)
    return (hash, value)


def _refuse_deferred(name: str, result: Any) -> None:
    """Refuse a function whose call only made a generator or coroutine (a plain function returning one, such
    as a lambda): none of the work it stands for ran during the capture."""
    if inspect.isgenerator(result) or inspect.iscoroutine(result) or inspect.isasyncgen(result):
        if inspect.iscoroutine(result):
            result.close()  # (never awaited: closed, so Python does not warn of it)
        raise TypeError(f"captured: {name} returned {type(result).__name__} {getattr(result, '__name__', '')!r}: "
                        f"its work does not run when it is called, so the capture recorded none of it. Decorate a "
                        f"function that enqueues the work itself")


_thread = threading.local()  # .token: this thread's _ThreadToken; .sentinel: collected when the thread ends


class _ThreadToken:
    """A thread's key part for the entries cached for it alone: an object no other thread gets, as long as an
    entry keeps it (a thread ident is given to a new thread once its thread ends, which would take over the
    old thread's graphs and overwrite the Arrays they returned to it). ``alive`` turns False when the thread
    ends (its thread-local sentinel is collected then)."""

    __slots__ = ("alive",)

    def __init__(self) -> None:
        self.alive = True


class _Sentinel:
    __slots__ = ("__weakref__",)


def _thread_token() -> _ThreadToken:
    token = getattr(_thread, "token", None)
    if token is None:
        token = _thread.token = _ThreadToken()
        _thread.sentinel = sentinel = _Sentinel()
        weakref.finalize(sentinel, setattr, token, "alive", False).atexit = False
    return token


def _check_options(max_graphs: Any, mode: Any) -> int:
    """``max_graphs`` as an int, once it and ``mode`` are checked."""
    count = as_int(max_graphs)
    if count is None or count < 1:
        raise ValueError(f"captured(max_graphs): expected an int of at least 1, got {describe(max_graphs)}")
    _capture_rules.check_mode(mode, "captured")
    return count


class CapturedFunction:
    """A function wrapped by ``captured``; call it like the function. See the module docstring."""

    def __init__(self, fn: Callable[..., Any], dynamic: tuple[str, ...], max_graphs: int, mode: str) -> None:
        if not callable(fn):
            raise TypeError(f"captured: expected a function, got {type(fn).__name__}")
        max_graphs = _check_options(max_graphs, mode)
        self._name = name = getattr(fn, "__qualname__", repr(fn))  # (a functools.partial has no __qualname__)
        for test, what, makes in ((inspect.isgeneratorfunction, "a generator function", "a generator"),
                                  (inspect.iscoroutinefunction, "an async function", "a coroutine"),
                                  (inspect.isasyncgenfunction, "an async generator function", "an async generator")):
            if test(fn):
                raise TypeError(f"captured: {name} is {what}: calling it runs none of its body (it only makes "
                                f"{makes}), so its capture would record no work. Decorate a plain function that "
                                f"enqueues the work")
        self._fn = fn
        self._signature = inspect.signature(fn)
        parameters = self._signature.parameters
        unknown = [p for p in dynamic if p not in parameters]
        if unknown:
            raise ValueError(f"captured(dynamic): {name} has no parameter {', '.join(map(repr, unknown))} "
                             f"(parameters: {', '.join(parameters)})")
        for p in dynamic:
            kind = parameters[p].kind
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                star = "*" if kind is inspect.Parameter.VAR_POSITIONAL else "**"
                raise ValueError(f"captured(dynamic): {name}'s parameter {star}{p} gathers any number of arguments, "
                                 f"and a dynamic argument is one value passed as one Param. Give the value a "
                                 f"named parameter of its own and name that in dynamic")
        self._dynamic = frozenset(dynamic)
        # A call that passes every parameter positionally (and nothing else) is bound without inspect: the
        # common case, on every replay. None where the signature has *args, **kwargs or keyword-only ones.
        plain = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY
        self._names = tuple(parameters) if all(p.kind in plain for p in parameters.values()) else None
        self._dynamic_flags = tuple(name in self._dynamic for name in parameters)
        self._max_graphs = max_graphs
        self._mode = mode
        # The cache, the entries in it and the stats change under this lock, and a launch patches its Params
        # and is enqueued under it, so a call never launches with another call's values. Reentrant: clear()
        # may be called from inside the function.
        self._lock = threading.RLock()
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        self._dropped: list[_Entry] = []  # taken out of the cache, to be closed (_close_dropped)
        self._closing = threading.Lock()  # one thread closes them at a time (no graph memory freed twice)
        self._per_thread = False  # some graph had memory: such entries are keyed by thread as well
        self.stats = CapturedStats()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        names = self._names
        if names is not None and not kwargs and len(args) == len(names):
            arguments = dict(zip(names, args))
        else:
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as exc:  # (inspect names no function: say which, as Python's own call would)
                raise TypeError(f"{self._name}(): {exc}") from None
            bound.apply_defaults()
            arguments = bound.arguments
        device = None
        for value in arguments.values():
            if type(value) is Array:
                device = value.device
                break
        stream = current_stream(device)
        # (In the signature's order, however the call passed them: a positional and a keyword call are one key.)
        key = tuple(map(_key_part, arguments.values(), self._dynamic_flags))
        with self._lock:
            entry = self._find(key)
            if entry is not None:
                self._replay(entry, arguments, stream)
                return entry.result
        return self._capture(key, arguments, stream)

    def _find(self, key: tuple) -> _Entry | None:
        """The entry answering ``key`` in this thread (most recently used now), or None."""
        entry = self._cache.get(key)
        if entry is None and self._per_thread:
            entry = self._cache.get((_thread_token(), key))
        if entry is not None:
            self._cache.move_to_end(entry.key)
        return entry

    def _replay(self, entry: _Entry, arguments: Any, stream: Stream) -> None:
        for name, param in entry.params.items():
            value = arguments[name]
            if param.changed_by(value):
                param.value = value
                self.stats.patches += 1
        self.stats.replays += 1
        self._launch(entry, stream)

    @staticmethod
    def _launch(entry: _Entry, stream: Stream) -> None:
        # The stream first: the graph memory a launch allocates is freed on it, and a KeyboardInterrupt
        # surfacing from the launch came after the launch was made. An error means no launch.
        previous, entry.stream = entry.stream, stream
        try:
            entry.exe.launch(stream)
        except Exception:
            entry.stream = previous
            raise

    def _capture(self, key: tuple, arguments: dict[str, Any], stream: Stream) -> Any:
        self._close_dropped()  # those an interrupt left (a capture may drop more: closed at its end)
        params = {name: Param(arguments[name]) for name in self._dynamic}
        call = inspect.BoundArguments(self._signature, dict(arguments, **params))
        capture_stream = own_stream(stream.device, "capture")  # captures in different threads never share one
        capture_stream.wait(stream.record())  # the captured work follows what the caller enqueued
        me = threading.get_ident()
        with use_stream(capture_stream), capture_stream.capture(mode=self._mode) as cap:
            # This thread's work on other streams of the device is refused meanwhile (no context manager:
            # its exit could be interrupted before it restores the mark).
            outer = _capture_rules.function_captures.get(me)
            try:
                _capture_rules.function_captures[me] = cap
                result = self._fn(*call.args, **call.kwargs)
                _refuse_deferred(self._name, result)
            finally:
                if outer is None:
                    _capture_rules.function_captures.pop(me, None)
                else:
                    _capture_rules.function_captures[me] = outer
        graph = cap.graph
        with self._lock:
            self.stats.captures += 1
            entry = self._find(key)
            if entry is not None:  # another thread captured the same key meanwhile: its graph serves
                self._replay(entry, arguments, stream)
                return entry.result
            entry = self._update_cached(graph, key, params, cap.allocations, result)
            if entry is not None:
                self._launch(entry, stream)
                return entry.result
        # Instantiated without the lock, which a call capturing in another thread may need meanwhile (to replay
        # another captured function inside its capture), once no other thread's global capture runs: CUDA
        # refuses instantiation while one does, and invalidates that capture.
        with _capture_rules.unsafe_section("captured (instantiating the captured graph)"):
            exe = graph.instantiate(auto_free_on_launch=True)
        with self._lock:
            entry = self._find(key)
            if entry is not None:  # another thread cached the same key meanwhile: its graph serves
                exe.close()
                self._replay(entry, arguments, stream)
                return entry.result
            self.stats.instantiations += 1
            entry = self._cache_new(graph, key, exe, params, cap.allocations, result)
            self._launch(entry, stream)
        self._close_dropped()
        # This call's value, not entry.result: once the lock is let go, another thread's call may update the
        # entry in place for its own key and value.
        return result

    def _cache_new(self, graph: Graph, key: tuple, exe: GraphExec, params: dict[str, Param], allocations: list[Array],
                   result: Any) -> _Entry:
        """Cache a new executable graph (for this thread alone when it has memory: an Array it returns is valid
        until the thread's next call, whatever other threads do), making room for it first: the entries
        taken out go to ``_dropped``, to be closed."""
        owner = None
        if _graph_reads.topology(graph).memory:
            owner = _thread_token()
            key = (owner, key)
            self._per_thread = True
        entry = _Entry(key, graph, exe, params, allocations, result, owner)
        # Room first, then the entry: an interrupt anywhere leaves at most max_graphs in each group. Each
        # entry is listed before it leaves the cache (one listed but still cached is not closed).
        for old in self._beyond_max_graphs(joining=owner):
            self._dropped.append(old)
            del self._cache[old.key]
            self.stats.evictions += 1
        self._cache[key] = entry
        return entry

    def _beyond_max_graphs(self, joining: _ThreadToken | None) -> list[_Entry]:
        """The least recently used entries beyond ``max_graphs`` in each group (the shared graphs, each live
        thread's own, and those of ended threads together), leaving room for one more in the group of
        ``joining`` (the owner of an entry to add)."""
        groups: dict[Any, list[_Entry]] = {}
        for cached in self._cache.values():  # least recently used first
            group = cached.owner if cached.owner is None or cached.owner.alive else "ended"
            groups.setdefault(group, []).append(cached)
        return [old for group, members in groups.items()
                for old in members[:max(0, len(members) - self._max_graphs + (group is joining))]]

    def _update_cached(self, graph: Graph, key: tuple, params: dict[str, Param], allocations: list[Array],
                       result: Any) -> _Entry | None:
        """Update a cached executable graph of the same topology in place, re-keyed to ``key``."""
        if _graph_reads.topology(graph).memory:
            return None
        topology = _topology(graph)
        for entry in reversed(self._cache.values()):
            if entry.topology != topology:
                continue
            try:
                entry.exe.update(graph)
            except GraphUpdateError:
                continue
            except BaseException:  # (KeyboardInterrupt) it may have stopped after the update took effect
                if source_of(entry.exe) is graph:
                    self._rekey(entry, key, graph, params, allocations, result)
                raise
            # The executable graph runs the new graph now: the entry follows it whatever happens.
            try:
                self._rekey(entry, key, graph, params, allocations, result)
            except BaseException:
                self._rekey(entry, key, graph, params, allocations, result)
                raise
            self.stats.updates += 1
            return entry
        return None

    def _rekey(self, entry: _Entry, key: tuple, graph: Graph, params: dict[str, Param], allocations: list[Array],
               result: Any) -> None:
        self._cache.pop(entry.key, None)
        entry.key, entry.graph, entry.params, entry.allocations, entry.result = key, graph, params, allocations, result
        self._cache[key] = entry

    def clear(self) -> None:
        """Drop every cached graph (every thread's) and free the graph memory they hold."""
        with self._lock:
            self._dropped += self._cache.values()  # listed first (see _cache_new)
            self._cache.clear()
        self._close_dropped()

    def _close_dropped(self) -> None:
        """Close the entries taken out of the cache, freeing their graph memory: without the lock, once no
        other thread's global capture runs (freeing graph memory is forbidden while one does, as instantiating
        is). Each close runs with Ctrl-C held back, so an interrupt stops this only between two entries, and
        the next capture (or clear) closes the rest: no graph memory is left behind."""
        if not self._dropped:
            return
        with self._closing, _capture_rules.unsafe_section("captured (dropping a cached graph)"):
            while True:
                with self._lock:
                    # One whose taking out was interrupted is still cached: not dropped after all.
                    self._dropped = [e for e in self._dropped if self._cache.get(e.key) is not e]
                    if not self._dropped:
                        return
                    entry = self._dropped[0]
                _interrupts.without_interrupts(entry.close)
                with self._lock:
                    if entry in self._dropped:  # (closing again is harmless: Entry.close is idempotent)
                        self._dropped.remove(entry)

    def __repr__(self) -> str:
        return f"captured({self._name}, {len(self._cache)} graphs cached)"


def captured(fn: Callable[..., Any] | None = None, *, dynamic: tuple[str, ...] | list[str] = (),
             max_graphs: int = 16, mode: str = "global") -> Any:
    """Capture a function into a graph on its first call and replay it afterwards (module docstring).

    Args:
        fn: The function; it enqueues its GPU work on ``gg.current_stream()``.
        dynamic: Names of arguments that change from call to call without a new capture: they are
            passed to the function's kernels as Params and patched on replay.
        max_graphs: How many graphs of different topologies to keep (least recently used dropped): shared
            graphs, and graphs with memory of each thread (and of ended threads together).
        mode: The capture mode ("global", "thread_local" or "relaxed").

    Returns:
        A CapturedFunction (or a decorator making one, when called with options only).
    """
    names = _dynamic_names(dynamic)
    max_graphs = _check_options(max_graphs, mode)  # at decoration, also as @gg.captured(...)
    if fn is None:
        return lambda f: CapturedFunction(f, names, max_graphs, mode)
    return CapturedFunction(fn, names, max_graphs, mode)


def _dynamic_names(dynamic: object) -> tuple[str, ...]:
    """``captured``'s ``dynamic``: a parameter's name, or a tuple, list or set of them."""
    names = (dynamic,) if isinstance(dynamic, str) else dynamic
    if not isinstance(names, (tuple, list, set, frozenset)) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"captured(dynamic): expected a tuple of parameter names (str), got {describe(dynamic)}")
    return tuple(names)
