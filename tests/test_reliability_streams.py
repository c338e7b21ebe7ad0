"""Reliability of streams: host functions refused the calls CUDA forbids there (whatever the
graph's shape), what interpreter exit does with queued work, work of dropped streams, and every stream's
error reported by a device synchronize.

Calls that must not deadlock run in a thread joined with a timeout; interpreter exits run in subprocesses
with a timeout.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def finishes(fn, timeout: float = 10.0) -> None:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) when it has not returned in time."""
    failure: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "deadlocked (still waiting after the timeout)"
    if failure:
        raise failure[0]


def run_script(code: str, backend: str = "cpu", exit_timeout: object = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter, after ``dev = gg.Device(backend)``; fail if it has not exited in
    ``timeout`` seconds (subprocess.TimeoutExpired). ``exit_timeout``: $GPUGRAPH_EXIT_TIMEOUT."""
    environ = {k: v for k, v in os.environ.items() if k != "GPUGRAPH_EXIT_TIMEOUT"}
    environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))
    if exit_timeout is not None:
        environ["GPUGRAPH_EXIT_TIMEOUT"] = str(exit_timeout)
    prelude = f"import sys, threading, time\nimport gpugraph as gg\ndev = gg.Device({backend!r})\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                          text=True, env=environ, timeout=timeout)


# Host functions must not wait or enqueue, on any backend, whatever the shape


def test_host_nodes_of_parallel_branches_cannot_synchronize_their_stream(device):
    done = run_script("""
        s, caught = dev.stream(), []

        def sync_own_stream():
            try:
                s.synchronize()
            except gg.GpuGraphError as exc:
                caught.append(str(exc))

        g = gg.Graph(dev)
        for _ in range(6):  # independent branches: the stream's thread runs one, other threads the rest
            g.add_host(sync_own_stream)
        g.instantiate().launch(s)
        s.synchronize()
        print(len(caught), all(c.startswith("Stream.synchronize was called from a host function") for c in caught))
    """, backend=str(device), timeout=30)
    assert (done.returncode, done.stdout) == (0, "6 True\n"), done.stderr


def test_host_functions_of_two_streams_cannot_synchronize_each_other(device):
    done = run_script("""
        a, b, gate, caught = dev.stream(), dev.stream(), threading.Event(), []

        def sync(other):
            try:
                other.synchronize()
            except gg.GpuGraphError as exc:
                caught.append(str(exc))

        a.host(gate.wait, 10)  # both host functions are queued before either runs
        a.host(sync, b)
        b.host(sync, a)
        gate.set()
        a.synchronize()
        b.synchronize()
        print(len(caught), all("Stream.synchronize was called from a host function" in c for c in caught))
    """, backend=str(device), timeout=30)
    assert (done.returncode, done.stdout) == (0, "2 True\n"), done.stderr


def _calls(device, other, x, freed, exe, event):
    """What a host function tries: each call waits or enqueues (name, call)."""
    source = device.asarray(np.full(4, 9, np.int32))
    return [
        ("Stream.launch", lambda: other.launch(K.fill, 1, 4, x, 9, 4)),
        ("Stream.memcpy", lambda: other.memcpy(x, source)),
        ("Device.asarray", lambda: device.asarray(np.full(4, 9, np.int32))),
        ("Device.pinned", lambda: device.pinned(4, np.int32)),
        ("Stream.memset", lambda: other.memset(x, 9)),
        ("Stream.host", lambda: other.host(print, "never printed")),
        ("Stream.alloc", lambda: other.alloc(4, np.int32)),
        ("Stream.free", lambda: other.free(freed)),
        ("Stream.record", lambda: other.record(event)),
        ("Stream.wait", lambda: other.wait(event)),
        ("Stream.synchronize", other.synchronize),
        ("Event.synchronize", event.synchronize),
        ("Device.synchronize", device.synchronize),
        ("Array.to_numpy", x.to_numpy),
        ("GraphExec.launch", lambda: exe.launch(other)),
    ]


def _refusal_setup(device, stream):
    other = device.stream()
    x = device.zeros(4, np.int32)
    freed = stream.alloc(4, np.int32)
    event = stream.record()
    g = gg.Graph(device)
    g.add_kernel(K.fill, 1, 4, x, 9, 4)
    return other, x, freed, g.instantiate(), event


def test_host_function_calls_that_wait_or_enqueue_are_refused(device):
    stream = device.stream()  # not the fixture's: a deadlock must not hang its teardown
    other, x, freed, exe, event = _refusal_setup(device, stream)
    stream.synchronize()
    calls = _calls(device, other, x, freed, exe, event)
    outcome = {}

    def attempt(name, call):
        try:
            call()
        except gg.GpuGraphError as exc:
            outcome[name] = str(exc)
        else:
            outcome[name] = "ran"

    for name, call in calls:
        stream.host(attempt, name, call)
    finishes(stream.synchronize)
    for name, _ in calls:
        api = "a device allocation (Device.empty, Device.zeros, Device.asarray)" if name == "Device.asarray" else name
        assert outcome[name].startswith(f"{api} was called from a host function"), (name, outcome[name])
    finishes(other.synchronize)
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 0, 0])  # nothing refused ran
    stream.free(freed)  # the refused free left it allocated
    stream.synchronize()
    exe.close()


def test_graph_host_node_that_launches_raises_at_synchronize(device):
    stream = device.stream()  # not the fixture's: a deadlock must not hang its teardown
    other, x, freed, exe, _ = _refusal_setup(device, stream)
    g = gg.Graph(device)
    a = g.add_host(lambda: other.launch(K.fill, 1, 4, x, 9, 4))
    g.add_host(lambda: None)  # a parallel branch
    g.add_host(lambda: None, after=a)
    with g.instantiate() as graph:
        graph.launch(stream)
        with pytest.raises(gg.GpuGraphError, match=r"Stream\.launch was called from a host function"):
            finishes(stream.synchronize)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [0, 0, 0, 0])
    stream.free(freed)
    stream.synchronize()
    exe.close()


def test_cpu_kernel_cannot_synchronize(device):
    stream = device.stream()  # not the fixture's: a deadlock must not hang its teardown
    if device.backend != "cpu":
        pytest.skip("only the CPU backend runs kernels as Python functions")
    caught = []

    def sync_in_kernel(launch, x, v, n):
        try:
            stream.synchronize()
        except gg.GpuGraphError as exc:
            caught.append(exc)

    kernel = gg.Kernel(K.SOURCE, "fill", cpu=sync_in_kernel)
    stream.launch(kernel, 1, 4, device.zeros(4, np.int32), 1, 4)
    finishes(stream.synchronize)
    assert len(caught) == 1 and "Stream.synchronize was called from a host function" in str(caught[0])


def test_synchronize_from_an_ordinary_thread_still_works(device, stream):
    x = device.zeros(4, np.int32)
    stream.launch(K.fill, 1, 4, x, 5, 4)
    finishes(stream.synchronize)  # another thread, not a host function: allowed
    np.testing.assert_array_equal(x.to_numpy(), [5, 5, 5, 5])


# Work of a stream dropped while busy is finished and waited for


def _work_on_a_temporary_stream(device, x, gate):
    s = device.stream()
    s.host(gate.wait, 10)
    s.launch(K.fill, 1, 4, x, 7, 4)
    # s is collected on return, with its work still queued


def test_device_synchronize_waits_for_the_work_of_a_dropped_stream(device):
    x, gate = device.zeros(4, np.int32), threading.Event()
    _work_on_a_temporary_stream(device, x, gate)
    gc.collect()
    threading.Timer(0.05, gate.set).start()
    finishes(lambda: np.testing.assert_array_equal(x.to_numpy(), [7, 7, 7, 7]))


def test_errors_of_a_dropped_stream_surface_at_the_next_device_synchronize(device):
    gate = threading.Event()

    def fail():
        s = device.stream()
        s.host(gate.wait, 10)
        s.host(lambda: 1 / 0)

    fail()
    gc.collect()
    gate.set()
    with pytest.raises(ZeroDivisionError):
        finishes(device.synchronize)
    finishes(device.synchronize)  # reported once


def test_many_dropped_streams_are_all_waited_for(device):
    xs = [device.zeros(1, np.int32) for _ in range(20)]
    gate = threading.Event()
    for i, x in enumerate(xs):
        s = device.stream()
        s.host(gate.wait, 10)
        s.memset(x, i + 1)
        del s
    gc.collect()
    gate.set()
    device.synchronize()
    assert [int(x.to_numpy()[0]) for x in xs] == list(range(1, 21))


def test_streams_destroyed_while_other_threads_synchronize_never_hang(device):
    """A stream destroyed while a device synchronize or the legacy stream's implicit ordering is about to
    queue a marker on it: the marker still runs (before, the synchronize could wait forever)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    stop, legacy = threading.Event(), device.default_stream

    def synchronize_device():
        while not stop.is_set():
            device.synchronize()

    def use_legacy():
        while not stop.is_set():
            legacy.host(lambda: None)
            legacy.synchronize()

    threads = [threading.Thread(target=f, daemon=True) for f in (synchronize_device, use_legacy)]
    try:
        for t in threads:
            t.start()
        for i in range(500):
            s = device.stream(non_blocking=bool(i % 2))
            s.host(lambda: None)
            del s  # destroyed at once, its work maybe still queued
    finally:
        stop.set()
        sys.setswitchinterval(switch)
        for t in threads:
            t.join(10)
    assert not any(t.is_alive() for t in threads), "a synchronize never returned"
    finishes(device.synchronize)


# A device synchronize reports the error of every stream


def test_device_synchronize_reports_the_errors_of_every_stream(device):
    a, b, c = device.stream(), device.stream(), device.stream()
    a.host(lambda: 1 / 0)
    b.host(lambda: (_ for _ in ()).throw(RuntimeError("boom on b")))
    c.host(lambda: None)
    with pytest.raises(gg.StreamErrors, match=r"2 streams.*ZeroDivisionError.*RuntimeError: boom on b") as info:
        device.synchronize()
    assert [type(e) for e in info.value.errors] == [ZeroDivisionError, RuntimeError]
    assert isinstance(info.value, gg.GpuGraphError)
    a.synchronize()  # each was reported once, by the device synchronize
    b.synchronize()
    device.synchronize()


def test_one_failing_stream_raises_its_own_error(device):
    a = device.stream()
    a.host(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        device.synchronize()
    device.synchronize()


def test_errors_of_a_live_and_a_dropped_stream_are_both_reported(device):
    live, gate = device.stream(), threading.Event()

    def dropped():
        s = device.stream()
        s.host(gate.wait, 10)
        s.host(lambda: (_ for _ in ()).throw(KeyError("dropped")))

    dropped()
    gc.collect()
    live.host(lambda: 1 / 0)
    gate.set()
    with pytest.raises(gg.StreamErrors) as info:
        finishes(device.synchronize)
    assert sorted(type(e).__name__ for e in info.value.errors) == ["KeyError", "ZeroDivisionError"]
    finishes(device.synchronize)


# Flags must be bools


@pytest.mark.parametrize("value", ["no", 0, 1, None, 2.0])
def test_stream_non_blocking_must_be_a_bool(device, value):
    with pytest.raises(TypeError, match=rf"stream: non_blocking must be a bool, got {value!r}"):
        device.stream(non_blocking=value)


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_event_timing_must_be_a_bool(device, value):
    with pytest.raises(TypeError, match=rf"event: timing must be a bool, got {value!r}"):
        device.event(timing=value)


def test_numpy_bools_are_bools(device):
    assert device.stream(non_blocking=np.False_).non_blocking is False
    assert device.event(timing=np.True_).timing is True


# Interpreter exit: queued work finishes, within a bounded wait, on every backend


def test_exit_runs_queued_host_functions(device):
    done = run_script("""
        s = dev.stream()
        for i in range(4):
            s.host(lambda i=i: (time.sleep(0.05), print("ran", i, flush=True)))
    """, backend=str(device))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["ran 0", "ran 1", "ran 2", "ran 3"]
    assert done.stderr == ""


def test_exit_runs_every_branch_of_a_parallel_graph(device):
    done = run_script("""
        g = gg.Graph(dev)
        for i in range(12):
            g.add_host(lambda i=i: (time.sleep(0.05), sys.stdout.write(f"branch {i}\\n")))
        exe = g.instantiate()
        s = dev.stream()
        exe.launch(s)
        exe.launch(s)
    """, backend=str(device))
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(f"branch {i}" for i in range(12) for _ in range(2))


@pytest.mark.blocks_exit
def test_exit_with_a_blocked_graph_branch_ends_after_the_bounded_wait(device):
    start = time.monotonic()
    done = run_script("""
        never = threading.Event()
        g = gg.Graph(dev)
        g.add_host(never.wait)
        g.add_host(print, "free branch ran")
        s = dev.stream()
        g.instantiate().launch(s)
        s.host(print, "never reached")
    """, backend=str(device), exit_timeout=0.5)
    assert time.monotonic() - start < 30
    assert done.returncode == 0, done.stderr
    # CUDA may run host functions of independent branches one after the other (on one thread).
    assert done.stdout == "free branch ran\n" or (device.backend == "cuda" and done.stdout == "")
    assert "did not finish within 0.5 s" in done.stderr and "GPUGRAPH_EXIT_TIMEOUT" in done.stderr


@pytest.mark.blocks_exit
def test_exit_with_a_stream_blocked_on_an_event_never_set_ends(device):
    done = run_script("""
        s = dev.stream()
        s.host(threading.Event().wait)
        other = dev.stream()
        other.wait(s.record())
        other.host(print, "never reached")
    """, backend=str(device), exit_timeout=0.2)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    unfinished = "2 CPU streams" if device.backend == "cpu" else f"CUDA device {device.index}"
    assert f"{unfinished} did not finish within 0.2 s" in done.stderr


def test_exit_reports_errors_no_synchronize_reported(device):
    done = run_script("""
        s = dev.stream()
        s.host(lambda: 1 / 0)
    """, backend=str(device))
    assert done.returncode == 0
    assert "ZeroDivisionError: division by zero" in done.stderr and "never reported" in done.stderr


def test_exit_with_a_work_of_a_dropped_stream(device):
    done = run_script("""
        def work():
            s = dev.stream()
            s.host(time.sleep, 0.1)
            s.host(print, "dropped stream's work ran")
        work()
    """, backend=str(device))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "dropped stream's work ran\n"


def test_a_bad_exit_timeout_is_reported_and_the_default_used(device):
    done = run_script("s = dev.stream(); s.host(print, 'ran')", backend=str(device), exit_timeout="soon")
    assert done.returncode == 0
    assert done.stdout == "ran\n"
    assert "GPUGRAPH_EXIT_TIMEOUT must be a number of seconds, got 'soon'" in done.stderr


# A CPU stream's count of queued work stays whole when queueing is stopped by an exception


class _QueueStoppedOnce:
    """Stands for a CPU stream's task queue: the first put raises ``exc``, before queueing the task (as an
    exception raised inside the put would) or after (as a signal's KeyboardInterrupt, raised once the call
    has returned)."""

    def __init__(self, tasks, exc: type[BaseException], when: str) -> None:
        self.tasks, self.exc, self.when, self.armed = tasks, exc, when, True

    def put(self, item) -> None:
        if self.armed and self.when == "before":
            self.armed = False
            raise self.exc
        self.tasks.put(item)
        if self.armed:
            self.armed = False
            raise self.exc


def assert_count_whole(stream: gg.Stream) -> None:
    """The stream reports work pending exactly while it is: not done while a task waits, done after."""
    finishes(stream.synchronize)
    assert stream.done
    gate = threading.Event()
    stream.host(gate.wait)
    assert not stream.done  # a count ahead of the work would say done here
    gate.set()
    finishes(stream.synchronize)
    assert stream.done  # a count that noted a task never queued would never say done again


@pytest.mark.parametrize("exc", [KeyboardInterrupt, MemoryError])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_stopped_put_leaves_the_cpu_stream_count_whole(device, monkeypatch, exc, when):
    """The count was raised before the task was queued: stopped between the two, the stream never said
    done again (Stream.done polled forever)."""
    if device.backend != "cpu":
        pytest.skip("stops the CPU stream's own queue (CUDA's stream is the driver's)")
    stream = device.stream()
    x = device.zeros(4, np.float32)
    monkeypatch.setattr(stream._handle, "_tasks", _QueueStoppedOnce(stream._handle._tasks, exc, when))
    with pytest.raises(exc):
        stream.memset(x, 1.0)
    monkeypatch.undo()
    assert_count_whole(stream)
    np.testing.assert_array_equal(x.to_numpy(), 1.0 if when == "after" else 0.0)  # queued: it ran


def test_a_cpu_stream_is_done_once_synchronize_returns(device, monkeypatch):
    """synchronize returned once its marker had woken it, before the worker noted the marker run: Stream.done
    just after could say False (4 in 20,000 with a short switch interval). CUDA's query succeeds then."""
    if device.backend != "cpu":
        pytest.skip("slows the CPU stream worker's own bookkeeping")
    from gpugraph.backends.cpu import _streams

    class SlowToNote(threading.Event):
        def set(self) -> None:
            super().set()
            time.sleep(0.05)  # the worker notes the task run only after this returns

    monkeypatch.setattr(_streams, "threading", types.SimpleNamespace(**{**vars(threading), "Event": SlowToNote}))
    stream = device.stream()
    for _ in range(3):
        stream.host(int)
        finishes(stream.synchronize)
        assert stream.done


def test_real_sigints_while_queueing_leave_the_cpu_stream_count_whole():
    """Real SIGINTs sent while a CPU stream queues host functions: every interrupted call queued its task
    or not, and the stream says done exactly when its work has run."""
    done = run_script("""
        import random, signal
        s = dev.stream()
        ran, armed = [], [False]

        def on_sigint(signum, frame):
            if armed[0]:  # only inside the call below, once per arming
                armed[0] = False
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_sigint)
        main, stop, sent = threading.get_ident(), threading.Event(), [0]

        def pester():
            rnd = random.Random(7)
            while not stop.is_set():
                time.sleep(rnd.uniform(0, 0.0002))
                signal.pthread_kill(main, signal.SIGINT)
                sent[0] += 1

        sys.setswitchinterval(1e-5)
        sender = threading.Thread(target=pester, daemon=True)
        sender.start()
        queued = interrupted = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                armed[0] = True
                s.host(ran.append, 1)
                armed[0] = False
                queued += 1
            except KeyboardInterrupt:
                interrupted += 1
            if (queued + interrupted) % 100 == 0:
                armed[0] = False
                s.synchronize()
                assert s.done, "the stream never says done again"
                gate = threading.Event()
                s.host(gate.wait)
                assert not s.done, "the stream says done while a task waits"
                gate.set()
                s.synchronize()
        stop.set()
        sender.join()
        armed[0] = False
        s.synchronize()
        assert s.done and queued <= len(ran) <= queued + interrupted, (queued, interrupted, len(ran))
        print(queued, interrupted, sent[0])
    """, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    queued, interrupted, sent = map(int, done.stdout.split())
    assert queued >= 100 and interrupted >= 100, f"{queued} calls queued, {interrupted} of {sent} SIGINTs landed in one"
