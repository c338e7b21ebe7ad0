"""Threads: what another thread's global capture forbids (the driver's answers, measured on the
H200 by tools/probes/gpu_probe_threads.py), ``@captured`` from several threads, and executable graphs shared by
threads. Every test runs on every backend."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 64
GRID, BLOCK = (1,), (N,)
TIMEOUT = 30.0


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a new thread, wait for it (bounded), and return its result or raise its exception."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 - raised in the caller
            out.append(("error", exc))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "the thread is stuck"
    kind, value = out[0]
    if kind == "error":
        raise value
    return value


@contextmanager
def global_capture_in_another_thread(device: gg.Device) -> Iterator[list]:
    """A global capture held open by another thread for the ``with`` block; yields a list that gets the
    outcome of its end ("complete", or the CaptureError that ended it)."""
    began, release, outcome = threading.Event(), threading.Event(), []

    def capture() -> None:
        s = device.stream()
        x = device.zeros(N, np.float32)
        try:
            with s.capture(mode="global"):
                s.launch(K.scale, GRID, BLOCK, x, 2.0, N)
                began.set()
                release.wait(TIMEOUT)
            outcome.append("complete")
        except gg.CaptureError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=capture)
    thread.start()
    assert began.wait(TIMEOUT)
    try:
        yield outcome
    finally:
        release.set()
        thread.join(TIMEOUT)
        assert not thread.is_alive()


def small_graph(x: gg.Array) -> gg.Graph:
    g = gg.Graph(x.device)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    return g


UNSAFE_CALLS = {
    "Graph.instantiate": lambda device, ctx: ctx["graph"].instantiate(),
    "Stream.done": lambda device, ctx: ctx["stream"].done,
    "Event.done": lambda device, ctx: ctx["event"].done,
    "Stream.alloc": lambda device, ctx: ctx["stream"].alloc(N, np.float32),
    "Stream.free": lambda device, ctx: ctx["stream"].free(ctx["block"]),
    "Stream.synchronize": lambda device, ctx: ctx["stream"].synchronize(),
    "Device.zeros": lambda device, ctx: device.zeros(N, np.float32),
}


@pytest.mark.parametrize("api", sorted(UNSAFE_CALLS))
def test_another_threads_global_capture_forbids_the_calls_cuda_refuses(device, api):
    """cuGraphInstantiate, cuStreamQuery, cuEventQuery, cuMemAllocAsync (a stream not capturing), ... answer
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from another thread and invalidate a global capture (H200)."""
    stream = device.stream()
    ctx = {"graph": small_graph(device.zeros(N, np.float32)), "stream": stream, "event": stream.record(),
           "block": stream.alloc(N, np.float32)}
    stream.synchronize()
    with global_capture_in_another_thread(device) as outcome:
        with pytest.raises(gg.CaptureError, match=rf"{api}: .*forbidden while a 'global' capture runs"):
            UNSAFE_CALLS[api](device, ctx)
    assert isinstance(outcome[0], gg.CaptureError) and api in str(outcome[0])  # the capture was invalidated


SAFE_CALLS = {
    "GraphExec.update": lambda device, ctx: ctx["exec"].update(small_graph(ctx["x"])),
    "GraphExec.launch": lambda device, ctx: ctx["exec"].launch(ctx["stream"]),
    "Graph.add_kernel": lambda device, ctx: small_graph(ctx["x"]),
    "Stream.launch": lambda device, ctx: ctx["stream"].launch(K.scale, GRID, BLOCK, ctx["x"], 1.0, N),
    "Device.stream": lambda device, ctx: device.stream(),
    "Stream.record": lambda device, ctx: ctx["stream"].record(),
}


@pytest.mark.parametrize("api", sorted(SAFE_CALLS))
def test_another_threads_global_capture_allows_the_calls_cuda_allows(device, api):
    x = device.zeros(N, np.float32)
    ctx = {"exec": small_graph(x).instantiate(), "stream": device.stream(), "x": x}
    with global_capture_in_another_thread(device) as outcome:
        SAFE_CALLS[api](device, ctx)
    assert outcome == ["complete"]
    ctx["stream"].synchronize()


def test_a_thread_local_capture_forbids_instantiating_in_its_own_thread_only(device):
    s = device.stream()
    x = device.zeros(N, np.float32)
    g = small_graph(x)
    with pytest.raises(gg.CaptureError, match=r"Graph\.instantiate"):  # at the end: it was invalidated
        with s.capture(mode="thread_local"):
            s.launch(K.scale, GRID, BLOCK, x, 2.0, N)
            in_thread(g.instantiate).close()  # another thread may
            with pytest.raises(gg.CaptureError, match=r"Graph\.instantiate: .*'thread_local'"):
                g.instantiate()


def test_captured_instantiates_once_another_threads_global_capture_has_ended(device):
    """A @captured call's instantiation waits for another thread's global capture to end (instantiating during
    it is forbidden in CUDA and would invalidate the capture), and the capture then completes."""
    @gg.captured(dynamic=("v",))
    def fill(out, v):
        gg.current_stream(out.device).launch(K.fill, GRID, BLOCK, out, v, N)

    def call() -> str:
        fill(out, 7)
        gg.current_stream(device).synchronize()
        return "done"

    out = device.zeros(N, np.int32)
    result: list[Any] = []
    with global_capture_in_another_thread(device) as outcome:
        caller = threading.Thread(target=lambda: result.append(call()))
        caller.start()
        caller.join(0.3)
        assert caller.is_alive() and fill.stats.instantiations == 0  # waiting for the capture to end
    caller.join(TIMEOUT)
    assert result == ["done"] and outcome == ["complete"] and fill.stats.instantiations == 1
    np.testing.assert_array_equal(out.to_numpy(), 7)


def test_a_new_thread_never_takes_over_a_finished_threads_graph_memory(device):
    """Per-thread entries keyed by thread ident would pass to a new thread given the ident of one that has ended:
    the new thread would replay the old one's graph and overwrite the Array it had returned."""
    @gg.captured(dynamic=("x",))
    def doubled(x):
        s = gg.current_stream(device)
        out = s.alloc(N, np.float32)
        s.launch(K.add, GRID, BLOCK, out, x, x, N)
        return out

    def call(value: float) -> tuple[int, gg.Array]:
        x = K.f32(device, np.full(N, value))
        out = doubled(x)
        gg.current_stream(device).synchronize()
        return threading.get_ident(), out

    results = [in_thread(lambda v=v: call(v)) for v in (1.0, 2.0, 3.0, 4.0)]
    if len({ident for ident, _ in results}) == len(results):
        pytest.skip("no thread ident was reused here (Linux reuses a joined thread's at once)")
    for value, (_, out) in zip((1.0, 2.0, 3.0, 4.0), results):
        np.testing.assert_array_equal(out.to_numpy(), 2 * value)
    assert doubled.stats.instantiations == 4


def test_threads_sharing_one_exec_take_turns(device):
    """Launches, updates and setters of one executable graph from several threads: each launch runs the
    graph as some serial order of the calls left it (the driver does not synchronize them: an update racing
    a launch mixed two graphs on the H200)."""
    xs = [device.zeros(N, np.int32) for _ in range(2)]
    host = device.pinned(2 * N, np.int32)

    def graph(value: int) -> tuple[gg.Graph, Any]:
        g = gg.Graph(device)
        first = g.add_kernel(K.fill, GRID, BLOCK, xs[0], value, N)
        second = g.add_kernel(K.fill, GRID, BLOCK, xs[1], value, N, after=first)
        g.add_memcpy(host[N:], xs[1], after=g.add_memcpy(host[:N], xs[0], after=second))
        return g, first

    (g_a, first), (g_b, _) = graph(1), graph(2)
    exe = g_a.instantiate()
    stream = device.stream()
    stop = threading.Event()

    def changer() -> None:
        while not stop.is_set():
            exe.update(g_b)
            exe.set_params(first, xs[0], 3, N)
            exe.update(g_a)

    seen = set()
    thread = threading.Thread(target=changer)
    thread.start()
    try:
        for _ in range(100):
            exe.launch(stream)
            stream.synchronize()
            assert (host[:N] == host[0]).all() and (host[N:] == host[N]).all()
            seen.add((int(host[0]), int(host[N])))
    finally:
        stop.set()
        thread.join(TIMEOUT)
    assert seen <= {(1, 1), (2, 2), (3, 2)}, seen  # the states the calls leave, one after another


def test_a_new_threads_first_call_may_patch_a_param(device):
    """A thread whose first gpugraph call is a launch that patches a Param: on the H200 the driver crashed
    (cuGraphExecKernelNodeSetParams from a thread with no current context, which a new thread has)."""
    out = device.zeros(N, np.int32)
    value = gg.Param(1, np.int32)
    g = gg.Graph(device)
    g.add_kernel(K.fill, GRID, BLOCK, out, value, N)
    exe = g.instantiate()
    stream = device.stream()
    exe.launch(stream)
    stream.synchronize()
    value.value = 7
    in_thread(lambda: exe.launch(stream))  # made in this thread: the new one only launches
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), 7)


def test_a_new_threads_first_call_may_replay_a_captured_function(device):
    @gg.captured(dynamic=("v",))
    def fill(out, v):
        gg.current_stream(out.device).launch(K.fill, GRID, BLOCK, out, v, N)

    out = device.zeros(N, np.int32)
    stream = device.stream()
    with gg.use_stream(stream):
        fill(out, 1)

    def replay() -> None:
        with gg.use_stream(stream):
            fill(out, 9)

    in_thread(replay)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), 9)
    assert fill.stats.replays == 1 and fill.stats.patches == 1


def test_host_functions_cannot_make_or_change_graphs_streams_and_events(device):
    """CUDA forbids CUDA calls in host functions: besides waits, enqueues and allocations (test_reliability_
    streams), making or changing graphs, executable graphs, streams and events, and queries, are refused."""
    x = device.zeros(N, np.int32)
    g = gg.Graph(device)
    kernel = g.add_kernel(K.fill, GRID, BLOCK, x, 1, N)
    exe = g.instantiate()
    stream, other = device.stream(), device.stream()
    event = other.record()
    other.synchronize()
    calls = {
        "Graph()": lambda: gg.Graph(device),
        "changing a Graph": g.add_empty,
        "Graph.clone": g.clone,
        "Graph.instantiate": g.instantiate,
        "GraphExec.update": lambda: exe.update(g),
        "GraphExec.set_params": lambda: exe.set_params(kernel, x, 2, N),
        "GraphExec.set_enabled": lambda: exe.set_enabled(kernel, False),
        # (is_enabled answers from the executable graph's own record, under cudaGraphNodeGetEnabled's rule)
        "GraphExec.is_enabled": lambda: exe.is_enabled(kernel),
        "GraphExec.upload": lambda: exe.upload(other),
        "Device.stream": device.stream,
        "Device.event": device.event,
        "Stream.done": lambda: other.done,
        "Event.done": lambda: event.done,
    }
    outcome: dict[str, str] = {}

    def attempt(name: str) -> None:
        try:
            calls[name]()
        except gg.GpuGraphError as exc:
            outcome[name] = str(exc)
        else:
            outcome[name] = "ran"

    for name in calls:
        stream.host(attempt, name)
    stream.synchronize()
    for name in calls:
        assert outcome[name].startswith(f"{name}"), (name, outcome[name])
        assert "was called from a host function" in outcome[name], (name, outcome[name])
    assert len(g) == 1  # nothing was added
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), 1)  # the exec was neither changed nor turned off


def test_another_threads_calls_never_drop_a_live_threads_graph_memory(device):
    """One LRU for all threads let thread B's calls evict, and free, the graph whose Array thread A was
    still holding (max_graphs=1)."""
    @gg.captured(max_graphs=1)
    def scaled(x, factor):
        s = gg.current_stream(device)
        out = s.alloc(N, np.float32)
        s.launch(K.add, GRID, BLOCK, out, x, x, N)
        s.launch(K.scale, GRID, BLOCK, out, factor, N)
        return out

    x = K.f32(device, np.full(N, 1.0))
    held, release, results = threading.Event(), threading.Event(), {}

    def thread_a() -> None:
        results["a"] = scaled(x, 1.0)
        gg.current_stream(device).synchronize()
        held.set()
        release.wait(TIMEOUT)
        results["a_later"] = results["a"].to_numpy()  # still this thread's, no call since

    a = threading.Thread(target=thread_a)
    a.start()
    assert held.wait(TIMEOUT)
    try:
        for factor in (2.0, 3.0, 4.0):  # new keys: instantiations beyond max_graphs, in this thread
            out = scaled(x, factor)
            gg.current_stream(device).synchronize()
            np.testing.assert_array_equal(out.to_numpy(), 2 * factor)
    finally:
        release.set()
        a.join(TIMEOUT)
    np.testing.assert_array_equal(results["a_later"], 2.0)


def test_ended_threads_graph_memory_is_kept_to_max_graphs(device):
    @gg.captured(max_graphs=2)
    def doubled(x):
        s = gg.current_stream(device)
        out = s.alloc(N, np.float32)
        s.launch(K.add, GRID, BLOCK, out, x, x, N)
        return out

    x = K.f32(device, np.full(N, 1.0))

    def call() -> None:
        doubled(x)
        gg.current_stream(device).synchronize()

    for _ in range(5):
        in_thread(call)  # each thread ends after its call
    assert doubled.stats.instantiations == 5
    assert len(doubled._cache) <= 3 and doubled.stats.evictions >= 2  # 2 kept, plus the last until the next


# Interrupts inside @captured calls and at a capture's exit


@contextmanager
def pythons_sigint_handler() -> Iterator[None]:
    """Python's default SIGINT handler for the block (pytest installs its own; the capture's stand-in
    replaces only the default, as in a program that has not set one)."""
    import signal
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers belong to the main thread")
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


LAST_SIGINT: list[str] = []  # where sigint_at last delivered its SIGINT (for failure messages)


def sigint_at(step: int, fn: Callable[[], Any]) -> bool:
    """``test_reliability_exec.interrupt_at``, with each interrupt delivered as a SIGINT is: through the SIGINT
    handler in place at that point, which the capture's stand-in may be (it holds the interrupt back at the
    first instruction of a capture's exit, and raises it once the capture has ended)."""
    import signal

    from test_reliability_exec import interrupt_at

    def deliver(frame: Any) -> None:
        code, handler = frame.f_code, signal.getsignal(signal.SIGINT)
        LAST_SIGINT[:] = [f"{code.co_filename}:{frame.f_lineno} in {code.co_name}", repr(handler)]
        handler(signal.SIGINT, frame)

    return interrupt_at(step, fn, deliver)


def graph_memory_in_use(device: gg.Device) -> int:
    """Graph memory still allocated once the device is idle, dropped graphs collected and the pool trimmed."""
    import gc
    device.synchronize()
    gc.collect()  # a graph keeps the memory of its allocations reserved while it lives
    device.trim_graph_memory()
    return device.graph_memory().used


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # SIGINTs landing in finalizers
@pytest.mark.parametrize("path", ["update in place", "instantiate and evict"])
def test_a_captured_call_interrupted_anywhere_leaves_nothing_half_done(device, path):
    """A SIGINT at every point where CPython could deliver it in a call that captures anew (each call has a
    new key): no capture is left running, the current stream is restored, the next call works, and the
    SIGINT stand-in is gone once no capture or use_stream block is left."""
    import signal

    from gpugraph import _capture_rules, _interrupts

    memory = path == "instantiate and evict"

    @gg.captured(max_graphs=1)
    def scaled(x, factor):
        s = gg.current_stream(device)
        if memory:  # graph memory: never updated in place, instantiated and evicted (max_graphs=1)
            tmp = s.alloc(N, np.float32)
            s.memcpy(tmp, x)
            s.memcpy(x, tmp)
        s.launch(K.scale, GRID, BLOCK, x, factor, N)
        return factor

    x = device.zeros(N, np.float32)
    stream = device.stream()
    host = device.pinned(N, np.float32)
    used_before = graph_memory_in_use(device)
    step, interrupted_at = -1, 0
    with pythons_sigint_handler():
        with gg.use_stream(stream):
            while True:
                factor = 2.0 + step * 0.5  # a new key at every call
                interrupted = sigint_at(step, lambda factor=factor: scaled(x, factor))
                interrupted_at += interrupted
                # Nothing held back without a release to come, no capture's guard left behind.
                assert not _interrupts._deferred_interrupt and not _interrupts._interrupt_guards, (step, LAST_SIGINT)
                assert len(scaled._cache) <= 1, (step, LAST_SIGINT)  # max_graphs, whatever was interrupted
                assert not _capture_rules.active and not _capture_rules.function_captures, (step, LAST_SIGINT)
                assert gg.current_stream(device) is stream, (step, LAST_SIGINT)
                stream.memset(x, 1.0)
                assert scaled(x, factor) == factor
                stream.memcpy(host, x)
                stream.synchronize()
                assert (host == factor).all(), (step, host[0], factor)
                if not interrupted and step >= 0:
                    break
                step += 1
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the stand-in given back
        assert not _interrupts._interrupt_guards
    assert interrupted_at > 50, interrupted_at  # the call was interrupted at many points
    scaled.clear()
    assert graph_memory_in_use(device) == used_before  # no interrupt left a dropped graph's memory allocated


def test_ctrl_c_at_the_first_instruction_of_a_captures_exit_is_held_back(device):
    """The first instruction of Capture.__exit__ is a check point no try can guard: the SIGINT stand-in
    notes an interrupt there and raises it once the capture has ended (the capture never stays open)."""
    import signal
    import sys

    from gpugraph import _capture, _capture_rules

    stream, x = device.stream(), device.zeros(N, np.float32)
    fired = []

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code is _capture.Capture.__exit__.__code__ and not fired:
            fired.append(True)
            handler = signal.getsignal(signal.SIGINT)  # the stand-in while the capture runs
            handler(signal.SIGINT, frame)  # as a SIGINT arriving at the exit's first instruction
        return None

    with pythons_sigint_handler():
        old = sys.gettrace()
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyboardInterrupt):
                with stream.capture() as cap:
                    stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)
        finally:
            sys.settrace(old)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    assert fired and not stream.is_capturing and not _capture_rules.active
    exe = cap.graph.instantiate()  # the capture completed before the interrupt was raised
    exe.launch(stream)
    stream.synchronize()


# Work enqueued on a captured stream as another thread ends the capture (a relaxed capture may be ended from any
# thread): the enqueue read the stream's capture before the end, and reaches the backend after it. The backend
# then makes it as uncaptured work, as the CUDA driver does; it never adds a node to the finished graph. The end
# is made to land in that window by ending the capture, on another thread, from inside the backend call.

def _enqueue(kind: str, stream: gg.Stream, x: gg.Array, source: gg.Array, ran: list[int], exe: Any) -> None:
    if kind == "launch":
        stream.launch(K.fill, GRID, BLOCK, x, 5, N)
    elif kind == "param launch":  # the captured launch keeps the Param: run uncaptured, it takes its value
        stream.launch(K.fill, GRID, BLOCK, x, gg.Param(np.int32(5)), N)
    elif kind == "memset":
        stream.memset(x, 5)
    elif kind == "memcpy":
        stream.memcpy(x, source)
    elif kind == "host":
        stream.host(ran.append, 1)
    elif kind == "graph":
        exe.launch(stream)


_BACKEND_CALL = {"launch": "stream_launch", "param launch": "stream_launch", "memset": "stream_memset",
                 "memcpy": "stream_memcpy", "host": "stream_host", "graph": "exec_launch"}


def _end_first(monkeypatch: pytest.MonkeyPatch, cap: Any, backend: Any, name: str) -> None:
    """Make the backend's ``name`` end ``cap`` on another thread before doing its work."""
    real = getattr(backend, name)

    def ended_first(*args: Any) -> Any:
        in_thread(lambda: cap.__exit__(None, None, None))
        return real(*args)
    monkeypatch.setattr(backend, name, ended_first)


@pytest.mark.parametrize("kind", list(_BACKEND_CALL))
def test_work_enqueued_as_another_thread_ends_the_capture_runs_uncaptured(device, monkeypatch, kind):
    stream = device.stream()
    x, source = device.zeros(N, np.int32), device.asarray(np.full(N, 5, np.int32))
    ran: list[int] = []
    graph = gg.Graph(device)
    graph.add_memset(x, 5)
    exe = graph.instantiate()
    cap = stream.capture(mode="relaxed")
    cap.__enter__()
    try:
        stream.memset(x, 1)  # one node captured before
        # (An executable graph calls the backend's launch it noted when made.)
        owner = exe if kind == "graph" else stream._backend
        _end_first(monkeypatch, cap, owner, "_launch" if kind == "graph" else _BACKEND_CALL[kind])
        _enqueue(kind, stream, x, source, ran, exe)
    finally:
        if stream.is_capturing:  # (only if the test failed before the end)
            cap.__exit__(None, None, None)
    monkeypatch.undo()
    assert not stream.is_capturing
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.MEMSET]  # nothing added after the end
    stream.synchronize()
    if kind == "host":
        assert ran == [1]
    else:
        np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5, np.int32))  # it ran, uncaptured
    with cap.graph.instantiate() as captured:  # the graph is whole: one memset
        captured.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.int32))
    exe.close()


def test_memory_and_events_used_as_another_thread_ends_the_capture_are_uncaptured(device, monkeypatch):
    # Each call reaches the backend after the end: an allocation is stream-ordered memory, not the capture's,
    # and an event recorded then is a plain record that can be waited for.
    stream, other = device.stream(), device.stream()
    event = device.event()
    for name, call in (("stream_alloc", lambda: stream.alloc(N, np.int32)),
                       ("event_record", lambda: stream.record(event))):
        cap = stream.capture(mode="relaxed")
        cap.__enter__()
        try:
            _end_first(monkeypatch, cap, stream._backend, name)
            made = call()
        finally:
            if stream.is_capturing:
                cap.__exit__(None, None, None)
        monkeypatch.undo()
        assert not stream.is_capturing and len(cap.graph.nodes) == 0, name
        if name == "stream_alloc":
            array = made
            assert not cap.allocations, "an uncaptured allocation is not the capture's"
            stream.memset(array, 4)
            np.testing.assert_array_equal(array.to_numpy(), np.full(N, 4, np.int32))
    other.wait(event)  # a plain record: waiting is allowed
    other.synchronize()


ENDED_EVENT = "was last recorded inside a capture that has ended"


def test_a_stream_waiting_as_another_thread_ends_the_capture_is_refused_and_joins_nothing(device, monkeypatch):
    # The wait reaches the backend after the end: the CUDA driver refuses it (measured on the H200), so both
    # backends do, and the stream does not join the ended capture.
    stream, other = device.stream(), device.stream()
    x = device.zeros(N, np.int32)
    event = device.event()
    cap = stream.capture(mode="relaxed")
    cap.__enter__()
    try:
        stream.memset(x, 1)
        stream.record(event)
        _end_first(monkeypatch, cap, stream._backend, "stream_wait_event")
        with pytest.raises(gg.CaptureError, match=ENDED_EVENT):
            other.wait(event)
    finally:
        if stream.is_capturing:
            cap.__exit__(None, None, None)
    monkeypatch.undo()
    assert not stream.is_capturing and not other.is_capturing
    other.memset(x, 3)  # runs at once, uncaptured
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3, np.int32))
    assert len(cap.graph.nodes) == 1


def _event_of_an_ended_capture(device: gg.Device) -> tuple[gg.Stream, gg.Stream, gg.Array, gg.Event]:
    """Two streams, an int32 array and an event last recorded inside a capture (of a memset) that has ended."""
    stream, other = device.stream(), device.stream()
    x = device.zeros(N, np.int32)
    event = device.event()
    with stream.capture():
        stream.memset(x, 1)
        stream.record(event)
    return stream, other, x, event


def test_an_event_recorded_again_by_a_graph_launched_outside_any_capture_can_be_waited_for(device):
    stream, other, x, event = _event_of_an_ended_capture(device)
    graph = gg.Graph(device)
    graph.add_event_record(event, after=graph.add_memset(x, 6))
    with graph.instantiate() as exe:
        exe.launch(stream)  # records the event again, uncaptured
        other.wait(event)
        other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 6, np.int32))


def test_waiting_for_an_event_recorded_in_an_ended_capture_is_refused_until_recorded_again(device):
    stream, other, x, event = _event_of_an_ended_capture(device)
    with pytest.raises(gg.CaptureError, match=ENDED_EVENT):
        other.wait(event)
    stream.memset(x, 2)
    stream.record(event)  # recorded again, uncaptured: it can be waited for
    other.wait(event)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 2, np.int32))


def test_another_threads_step_does_not_hold_back_the_main_threads_ctrl_c(device):
    """A step another thread makes with Ctrl-C held back (without_interrupts) holds back no interrupt of the main
    thread, whose own release would be the only one to raise it, maybe much later."""
    import signal

    from gpugraph import _interrupts

    inside, leave = threading.Event(), threading.Event()

    def step() -> None:
        inside.set()
        leave.wait(30)

    worker = threading.Thread(target=_interrupts.without_interrupts, args=(step,))
    raised_at_the_signal = raised_later = False
    with pythons_sigint_handler():
        try:
            with gg.use_stream(device.stream()):  # (the block installs the stand-in)
                worker.start()
                try:
                    assert inside.wait(30)
                    try:
                        signal.raise_signal(signal.SIGINT)
                    except KeyboardInterrupt:
                        raised_at_the_signal = True
                finally:
                    leave.set()
                    worker.join(30)
        except KeyboardInterrupt:
            raised_later = True
    assert (raised_at_the_signal, raised_later) == (True, False)
    assert not _interrupts._holding and not _interrupts._deferred_interrupt
