"""Reliability of captures, updates and ``@gg.captured``, and the checks of ``captured(mode=...)`` and
``set_enabled``.

* Beginning or ending a capture, and updating an executable graph, are all or nothing whatever
  exception stops them, KeyboardInterrupt included. Each window (between a backend call and the front end's
  bookkeeping) is interrupted deterministically, by making the call in it raise KeyboardInterrupt, on every
  backend; then real SIGINTs are sent at random moments to a subprocess looping over the same operations.
  Afterwards the stream is not capturing, its work runs (a memset's result is visible), other threads can
  allocate, and an executable graph runs the whole old graph or the whole new one.
* ``@gg.captured`` called from several threads at once, each on its own stream, with a short
  switch interval: every call gets its own values and its own graph memory.
* A node turned off by ``set_enabled`` stays off through ``update``, and such an executable graph
  is not launched into a capture (which would embed the graph with the node on).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _capture, _capture_rules
from gpugraph._params import ParamUses

N = 8
GRID, BLOCK = K.launch_1d(N, 4)
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def interrupt(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, when: str = "before",
              raising: type[BaseException] = KeyboardInterrupt) -> None:
    """Make ``owner.name`` raise KeyboardInterrupt (or ``raising``) once, before or after doing its work."""
    original = getattr(owner, name)
    armed = [True]

    def wrapper(*args, **kwargs):
        if armed and when == "before":
            armed.clear()
            raise raising
        result = original(*args, **kwargs)
        if armed and when == "after":
            armed.clear()
            raise raising
        return result

    monkeypatch.setattr(owner, name, wrapper)


class _InterruptedLock:
    """Stands for _capture_rules.lock: the first ``with`` raises KeyboardInterrupt, as Ctrl-C there would."""

    def __init__(self) -> None:
        self.lock, self.armed = threading.Lock(), True

    def __enter__(self):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def assert_usable(device: gg.Device, stream: gg.Stream) -> None:
    """Nothing captures any more: the stream runs its work, every thread may allocate, captures work."""
    assert not stream.is_capturing
    x = device.zeros(N, np.float32)  # a synchronous allocation: refused while a global capture runs
    stream.memset(x, 7.0)  # runs now: not recorded into a graph nobody will launch
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), 7.0)  # waits for the device: refused while any stream captures
    got: list = []
    worker = threading.Thread(target=lambda: got.append(device.zeros(1, np.float32)))
    worker.start()
    worker.join(10)
    assert got, "another thread could not allocate"
    with stream.capture() as cap:
        stream.memset(x, 1.0)
    assert len(cap.graph) == 1


# An interrupted beginning


BEGIN_WINDOWS = {
    "backend record made": lambda mp, dev: interrupt(mp, dev._backend, "capture_create", "after"),
    "backend begin, before": lambda mp, dev: interrupt(mp, dev._backend, "capture_begin", "before"),
    "backend begin, after": lambda mp, dev: interrupt(mp, dev._backend, "capture_begin", "after"),
    "graph wrapped": lambda mp, dev: interrupt(mp, gg.Graph, "_wrap", "after"),
    "stream joined": lambda mp, dev: interrupt(mp, _capture.Capture, "_join", "after"),
    "capture registered": lambda mp, dev: mp.setattr(_capture_rules, "lock", _InterruptedLock()),
}


@pytest.mark.parametrize("window", BEGIN_WINDOWS)
def test_interrupted_capture_begin_leaves_nothing_capturing(device, stream, monkeypatch, window):
    x = device.zeros(N, np.float32)
    BEGIN_WINDOWS[window](monkeypatch, device)
    cap = stream.capture()
    with pytest.raises(KeyboardInterrupt), cap:
        stream.memset(x, 1.0)
    monkeypatch.undo()
    assert cap.graph is None and not cap.active
    assert_usable(device, stream)


def test_interrupted_capture_begin_into_a_graph_leaves_it_as_it_was(device, stream, monkeypatch):
    x = device.zeros(N, np.float32)
    g = gg.Graph(device)
    first = g.add_memset(x, 2.0)
    interrupt(monkeypatch, device._backend, "capture_begin", "after")
    with pytest.raises(KeyboardInterrupt), stream.capture(into=g, after=first):
        stream.memset(x, 1.0)
    monkeypatch.undo()
    assert g.nodes == (first,)
    assert_usable(device, stream)


# An interrupted end. Before the backend has ended the capture it is discarded; after, it is complete.


END_WINDOWS = {
    "join check": (lambda mp, dev: interrupt(mp, _capture.Capture, "_unjoined_streams"), "discarded"),
    "backend end, before": (lambda mp, dev: interrupt(mp, dev._backend, "capture_end", "before"), "discarded"),
    "backend end, after": (lambda mp, dev: interrupt(mp, dev._backend, "capture_end", "after"), "complete"),
    "front end finish": (lambda mp, dev: interrupt(mp, _capture.Capture, "_finish"), "complete"),
    "graph handed over": (lambda mp, dev: interrupt(mp, gg.Graph, "_take"), "complete"),
    "graph read again": (lambda mp, dev: interrupt(mp, gg.Graph, "_refresh"), "complete"),
}


@pytest.mark.parametrize("window", END_WINDOWS)
def test_interrupted_capture_end_discards_or_completes_the_capture(device, stream, monkeypatch, window):
    arm, outcome = END_WINDOWS[window]
    x = device.zeros(N, np.float32)
    cap = stream.capture()
    with pytest.raises(KeyboardInterrupt), cap:
        stream.memset(x, 5.0)
        arm(monkeypatch, device)  # armed inside the block: the end is interrupted, not the beginning
    monkeypatch.undo()
    assert not cap.active
    assert_usable(device, stream)
    if outcome == "discarded":
        assert cap.graph is None
        return
    assert len(cap.graph) == 1
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), 5.0)


@pytest.mark.parametrize("when", ["before", "after"])
def test_interrupted_end_of_a_capture_into_a_graph(device, stream, monkeypatch, when):
    """Into a graph: discarded, the graph keeps only its own nodes; complete, it has the captured one too."""
    x = device.zeros(N, np.float32)
    g = gg.Graph(device)
    first = g.add_memset(x, 2.0)
    with pytest.raises(KeyboardInterrupt), stream.capture(into=g, after=first):
        stream.memset(x, 3.0)
        interrupt(monkeypatch, device._backend, "capture_end", when)
    monkeypatch.undo()
    assert_usable(device, stream)
    assert len(g) == (1 if when == "before" else 2)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), 2.0 if when == "before" else 3.0)


ABORT_WINDOWS = {
    "backend abort, before": lambda mp, dev: interrupt(mp, dev._backend, "capture_abort", "before"),
    "backend abort, after": lambda mp, dev: interrupt(mp, dev._backend, "capture_abort", "after"),
    "forks joined": lambda mp, dev: interrupt(mp, _capture.Capture, "_join_forks"),
}


@pytest.mark.parametrize("window", ABORT_WINDOWS)
def test_interrupted_discard_of_a_failed_capture_still_ends_it(device, stream, monkeypatch, window):
    """The block raised (work forked to a second stream was never joined) and the discard is interrupted."""
    y = device.zeros(N, np.float32)
    other = device.stream()
    cap = stream.capture()
    with pytest.raises(KeyboardInterrupt), cap:
        other.wait(stream.record())  # forks `other` into the capture
        other.memset(y, 1.0)
        ABORT_WINDOWS[window](monkeypatch, device)
        raise ValueError("the user's own error")
    monkeypatch.undo()
    assert cap.graph is None and not other.is_capturing
    assert_usable(device, stream)
    assert_usable(device, other)


def _forked_capture(device: gg.Device, stream: gg.Stream, other: gg.Stream, body) -> gg.Capture:
    """Capture on ``stream``, fork ``other`` into it, run ``body(capture)``, then leave by an exception (an
    abort)."""
    y = device.zeros(N, np.float32)
    with pytest.raises(ValueError, match="abandoned"), stream.capture() as cap:
        other.wait(stream.record())
        other.memset(y, 1.0)
        body(cap)
        raise ValueError("abandoned")
    return cap


@pytest.mark.parametrize("when", ["before", "after"])
def test_cpu_abort_interrupted_in_the_captures_end_still_ends_it(device, stream, monkeypatch, when):
    """The discard's abort interrupted as the CPU capture's end is entered or has returned: the front end
    asks the backend again (capture_active) and aborts again, so neither stream captures afterwards."""
    if device.backend != "cpu":
        pytest.skip("interrupts the CPU backend's own abort (CUDA's is the lead's: cuStreamEndCapture)")
    from gpugraph.backends.cpu._capture import CpuCapture
    other, x = device.stream(), device.zeros(N, np.float32)
    with pytest.raises(KeyboardInterrupt), stream.capture() as cap:
        other.wait(stream.record())
        other.memset(x, 1.0)
        interrupt(monkeypatch, CpuCapture, "end", when)
        raise ValueError("the user's own error")
    monkeypatch.undo()
    assert not device._backend.capture_active(cap._handle)
    assert cap.graph is None and not stream.is_capturing and not other.is_capturing
    assert_usable(device, stream)
    assert_usable(device, other)


def test_cpu_abort_interrupted_anywhere_ends_the_capture_when_made_again(device, stream):
    """KeyboardInterrupt at each point of the CPU backend's abort where a signal handler could raise it: the
    abort made again, as the front end's discard makes it, ends the capture, and neither stream captures."""
    if device.backend != "cpu":
        pytest.skip("interrupts the CPU backend's own abort (CUDA's is the lead's: cuStreamEndCapture)")
    from test_reliability_exec import interrupt_at
    backend, other = device._backend, device.stream()
    step, outcome = -1, []  # first an abort traced whole (see interrupt_at), then one interrupted at each point

    def body(cap: gg.Capture) -> None:
        outcome[:] = [interrupt_at(step, lambda: backend.capture_abort(cap._handle))]
        backend.capture_abort(cap._handle)  # as the front end's discard makes it again
        assert not backend.capture_active(cap._handle)

    while True:
        cap = _forked_capture(device, stream, other, body)
        assert cap.graph is None and not stream.is_capturing and not other.is_capturing
        if not outcome[0] and step >= 0:
            break
        step += 1
    assert step > 1
    assert_usable(device, stream)
    assert_usable(device, other)


def test_cpu_fork_interrupted_anywhere_leaves_no_stream_capturing_after_the_abort(device, stream):
    """A fork interrupted at each point of the CPU backend's wait: after the abort, the capture has ended and
    the stream runs its work again."""
    if device.backend != "cpu":
        pytest.skip("interrupts the CPU backend's own fork (CUDA's is one driver call: cuStreamWaitEvent)")
    from test_reliability_exec import interrupt_at
    backend, other = device._backend, device.stream()
    step, outcome = -1, []  # first a fork traced whole (see interrupt_at), then one interrupted at each point

    def body(cap: gg.Capture) -> None:
        event = stream.record()
        outcome[:] = [interrupt_at(step, lambda: backend.stream_wait_event(other._handle, event._handle,
                                                                              cap._handle))]
        backend.capture_abort(cap._handle)
        assert not backend.capture_active(cap._handle), step

    while True:
        with pytest.raises(ValueError, match="abandoned"), stream.capture() as cap:
            body(cap)
            raise ValueError("abandoned")
        assert not other.is_capturing
        if not outcome[0] and step >= 0:
            break
        step += 1
    assert step > 2
    assert_usable(device, other)


def test_interrupted_explicit_node_at_the_frontier_is_completed(device, stream, monkeypatch):
    """The node stays and the frontier moves after it (CUDA cannot take a node out of a graph being
    captured), so later work still follows it."""
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        interrupt(monkeypatch, device._backend, "capture_set_dependencies")
        with pytest.raises(KeyboardInterrupt):
            cap.add_memset(x, 2.0)
        monkeypatch.undo()
        assert [n.params.value for n in cap.dependencies] == [2.0]
        cap.add_memset(x, 3.0)
    assert [n.kind.value for n in cap.graph.nodes] == ["memset", "memset", "memset"]
    assert len(cap.graph.edges) == 2  # a chain
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), 3.0)


# An interrupted update


def two_graphs(device: gg.Device, out: gg.Array, param: gg.Param) -> tuple[gg.Graph, gg.Graph]:
    """The same topology twice: fill ``out`` with 1 then scale it by 2 (old); with 3, then by ``param`` (new)."""
    graphs = []
    for value, factor in ((1.0, 2.0), (3.0, param)):
        g = gg.Graph(device)
        g.add_kernel(K.scale, GRID, BLOCK, out, factor, N, after=g.add_memset(out, value))
        graphs.append(g)
    return graphs[0], graphs[1]


UPDATE_WINDOWS = {  # Ctrl-C in the backend's update: its call is made again, whole
    "backend update, before": (lambda mp, dev: interrupt(mp, dev._backend, "exec_update", "before"), "new"),
    "backend update, after": (lambda mp, dev: interrupt(mp, dev._backend, "exec_update", "after"), "new"),
    "Params adopted": (lambda mp, dev: interrupt(mp, ParamUses, "adopt"), "new"),
    "new graph watched": (lambda mp, dev: interrupt(mp, gg.Graph, "_watch"), "new"),
}


def test_an_error_while_an_update_is_followed_leaves_the_exec_wholly_new(device, stream, monkeypatch):
    """Once the backend runs the new graph, the executable graph follows it even when an error (not only an
    interrupt) stops the following: its Params are the new graph's."""
    out = device.zeros(N, np.float32)
    factor = gg.Param(4.0)
    old, new = two_graphs(device, out, factor)
    with old.instantiate() as exe:
        interrupt(monkeypatch, ParamUses, "adopt", raising=MemoryError)
        with pytest.raises(MemoryError):
            exe.update(new)
        monkeypatch.undo()
        factor.value = 5.0  # reaches the exec only if it follows the new graph
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out.to_numpy(), 15.0)


@pytest.mark.parametrize("window", UPDATE_WINDOWS)
def test_interrupted_update_leaves_the_exec_wholly_old_or_wholly_new(device, stream, monkeypatch, window):
    arm, outcome = UPDATE_WINDOWS[window]
    out = device.zeros(N, np.float32)
    factor = gg.Param(4.0)
    old, new = two_graphs(device, out, factor)
    with old.instantiate() as exe:
        arm(monkeypatch, device)
        with pytest.raises(KeyboardInterrupt):
            exe.update(new)
        monkeypatch.undo()
        factor.value = 5.0  # reaches the exec only if it follows the new graph
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out.to_numpy(), 2.0 if outcome == "old" else 15.0)
        exe.update(old)  # and it goes on updating both ways
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out.to_numpy(), 2.0)
        exe.update(new)
        factor.value = 6.0
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out.to_numpy(), 18.0)


# Real SIGINTs, sent at random moments by a thread to a subprocess looping over captures,
# updates and @captured calls. The script prints a line per iteration done (its progress), then one JSON
# line of counts.

SIGINT_LOOP = r"""
import json, mmap, os, random, signal, struct, sys, time, traceback

# The sender: a process forked before anything starts a thread. It polls shared memory for the moment the
# main process chose (0: none yet), spins until then and sends SIGINT: no interpreter lock between the two,
# so the signal follows the moment within microseconds. The main process sets the moment LEAD seconds
# ahead and waits that long itself, so the sender is awake and spinning when the operation starts.
# Shared: the moment, how many signals were sent, a stop flag.
LEAD = 300e-6
shared = mmap.mmap(-1, 24)
parent = os.getpid()
if os.fork() == 0:
    while True:
        moment, count, stop = struct.unpack_from("dqq", shared)
        if stop or os.getppid() != parent:
            os._exit(0)
        if not moment:
            time.sleep(50e-6)  # idle: leave the cores to the main process
            continue
        while time.perf_counter() < moment:
            pass
        struct.pack_into("d", shared, 0, 0.0)
        os.kill(parent, signal.SIGINT)
        struct.pack_into("q", shared, 8, count + 1)

# Python's own handler, as a program that sets none has: a process started with SIGINT ignored (as a shell
# starts a job in the background) would pass that on to this one, and no SIGINT would interrupt anything.
signal.signal(signal.SIGINT, signal.default_int_handler)

def wait_until_sent(i):
    while struct.unpack_from("q", shared, 8)[0] <= i:
        time.sleep(1e-5)

import threading
import numpy as np
import gpugraph as gg

backend, scenario, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
dev = gg.Device(backend)
SOURCE = r'''
__global__ void scale(float* x, float f, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] *= f;}
}
__global__ void fill(float* x, float v, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = v;}
}
'''
def scale_cpu(launch, x, f, n):
    x[:min(int(n), launch.grid[0] * launch.block[0])] *= f
def fill_cpu(launch, x, v, n):
    x[:min(int(n), launch.grid[0] * launch.block[0])] = v
scale = gg.Kernel(SOURCE, "scale", cpu=scale_cpu)
fill = gg.Kernel(SOURCE, "fill", cpu=fill_cpu)
N = 8
package = os.path.dirname(gg.__file__)

s = dev.stream()
x = dev.zeros(N, np.float32)
other, y = dev.stream(), dev.zeros(N, np.float32)
keep = []  # nothing is collected in the loop: an interrupt inside a finalizer would be lost

if scenario == "update":
    # Old: x = 1, then scaled by 1 twenty times, then by 2. New: x = 3, ..., then by the Param. A half
    # update would mix the first node of one with the last of the other. (Long enough to be interrupted.)
    factor = gg.Param(4.0)
    graphs = []
    for value, f in ((1.0, 2.0), (3.0, factor)):
        g = gg.Graph(dev)
        node = g.add_memset(x, value)
        for _ in range(20):
            node = g.add_kernel(scale, 1, 32, x, 1.0, N, after=node)
        g.add_kernel(scale, 1, 32, x, f, N, after=node)
        graphs.append(g)
    exe = graphs[0].instantiate()
if scenario == "captured":
    @gg.captured(dynamic=("v",), max_graphs=2, mode="thread_local")
    def fill_scale(out, v, k):
        st = gg.current_stream(out.device)
        st.launch(fill, 1, 32, out, v, N)
        st.launch(scale, 1, 32, out, float(k % 3 + 1), N)
    mine = gg.current_stream(dev)

def operation(i):
    if scenario == "capture":
        cap = s.capture()
        keep.append(cap)
        with cap:
            s.memset(x, 1.0)
            s.memset(x, 2.0)
    elif scenario == "abort":  # a capture forked to `other` that fails: its way out aborts it
        cap = s.capture()
        keep.append(cap)
        try:
            with cap:
                other.wait(s.record())
                other.memset(y, 1.0)
                s.memset(x, 2.0)
                raise ValueError("abandoned")
        except ValueError:
            pass
    elif scenario == "update":
        exe.update(graphs[(i + 1) % 2])
    else:
        with gg.use_stream(s):
            fill_scale(x, float(i), i)

def check(i):
    assert not s.is_capturing, 'still capturing'
    s.memset(y, float(i))
    s.synchronize()
    assert (y.to_numpy() == i).all(), ('the memset did not run', y.to_numpy())
    other.memset(y, 1.0)  # this thread is not left marked as capturing a @captured function
    other.synchronize()
    if scenario == "abort":
        assert not other.is_capturing and (y.to_numpy() == 1.0).all(), ('the forked stream still captures', y)
    got = []
    t = threading.Thread(target=lambda: got.append(dev.zeros(1, np.float32)))
    t.start(); t.join(10)
    assert got, 'another thread could not allocate'
    if scenario == "update":
        factor.value = float(i % 5 + 1)
        exe.launch(s)
        s.synchronize()
        value = x.to_numpy()
        assert (value == 2.0).all() or (value == 3.0 * factor.value).all(), value
    if scenario == "captured":
        assert gg.current_stream(dev) is mine, ('current stream', gg.current_stream(dev))
        with gg.use_stream(s):
            fill_scale(x, 2.0, 5)
        s.synchronize()
        assert (x.to_numpy() == 6.0).all(), ('the call did not run', x.to_numpy())

import gc
gc.disable()
interrupted = inside = during = 0
longest = 50e-6
failures = []
for i in range(iterations):
    finished = False
    try:
        start = time.perf_counter() + LEAD
        struct.pack_into("d", shared, 0, start + random.uniform(0, longest))
        while time.perf_counter() < start:
            pass
        operation(i)
        finished = True
        wait_until_sent(i)  # however late the sender is: the signal then comes in here, not in the checks
        for _ in range(5000):  # short sleeps: the signal may reach another thread, then none of them ends
            time.sleep(1e-4)
    except KeyboardInterrupt as exc:
        interrupted += 1
        where = traceback.extract_tb(exc.__traceback__)[-1].filename
        inside += os.path.abspath(where).startswith(package)
    during += not finished
    longest = max(1e-6, longest * 0.8) if finished else min(1e-3, longest * 1.25)
    wait_until_sent(i)  # this iteration's signal is sent: none comes in the checks
    try:
        check(i)
    except Exception as exc:
        failures.append(f"{i}: {type(exc).__name__}: {exc}"[:300])
        if len(failures) > 3:
            break
    print(i, flush=True)
struct.pack_into("q", shared, 16, 1)
print(json.dumps({"interrupted": interrupted, "during": during, "inside": inside, "failures": failures}))
"""


STALLED_AFTER = 120.0  # seconds without progress: the child is stuck (an iteration takes well under one)


def run_while_progressing(args: list[str], env: dict[str, str]) -> tuple[int, list[str], str]:
    """Run ``args`` to its end however long that takes, as long as it prints something at least every
    STALLED_AFTER seconds; return its exit status, its lines and its stderr. One that goes quiet longer is
    stuck: it is killed, and the test fails."""
    out, stalled = b"", False
    with tempfile.TemporaryFile() as err:
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=env) as child:
            while not stalled:
                stalled = not select.select([child.stdout], [], [], STALLED_AFTER)[0]
                if stalled:
                    child.kill()
                elif chunk := os.read(child.stdout.fileno(), 1 << 16):
                    out += chunk
                else:
                    break  # the end of its output
        err.seek(0)
        errors = err.read().decode(errors="replace")[-3000:]
    lines = out.decode().splitlines()
    assert not stalled, f"no progress for {STALLED_AFTER} s after {lines[-1:]}; stderr: {errors}"
    return child.returncode, lines, errors


@pytest.mark.parametrize("scenario", ["capture", "abort", "update", "captured"])
def test_real_sigints_leave_captures_and_execs_whole(backend, scenario):
    iterations = 250
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    returncode, lines, errors = run_while_progressing(
        [sys.executable, "-c", SIGINT_LOOP, backend, scenario, str(iterations)], env)
    assert returncode == 0, errors
    counts = json.loads(lines[-1])
    assert counts["failures"] == [], counts
    assert counts["interrupted"] >= iterations * 0.9, counts  # (a few are lost in garbage-collector callbacks)
    assert counts["during"] >= iterations // 4, counts  # enough of them stopped the operation to mean something


# @gg.captured from several threads


@pytest.fixture
def short_switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def run_threads(work, count: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(t):
        try:
            work(t)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread is stuck"
    return errors


def threaded_functions(device: gg.Device, mode: str):
    @gg.captured(dynamic=("out", "v"), mode=mode)
    def fill(out, v, like):
        gg.current_stream(like.device).launch(K.fill, GRID, BLOCK, out, v, N)
        return "filled"

    @gg.captured(dynamic=("x",), mode=mode)
    def twice(x, like):
        s = gg.current_stream(like.device)
        tmp = s.alloc((N,), np.float32)  # graph memory: each thread's own
        s.launch(K.add, GRID, BLOCK, tmp, x, x, N)
        return tmp

    return fill, twice


def test_captured_calls_from_threads_each_get_their_own_values(device, short_switch_interval):
    """thread_local captures: each thread checks every call's results as soon as its stream has run them."""
    threads, calls = 4, 40
    fill, twice = threaded_functions(device, "thread_local")
    like = device.zeros(N, np.float32)
    outs = [device.zeros(N, np.int32) for _ in range(threads)]
    xs = [K.f32(device, np.full(N, t + 1.0)) for t in range(threads)]
    streams = [device.stream() for _ in range(threads)]
    ints = [device.pinned(N, np.int32) for _ in range(threads)]
    floats = [device.pinned(N, np.float32) for _ in range(threads)]
    wrong: list[tuple] = []

    def work(t):
        s = streams[t]
        with gg.use_stream(s):
            for i in range(calls):
                value = 1000 * t + i
                assert fill(outs[t], value, like) == "filled"
                s.memcpy(ints[t], outs[t])
                s.memcpy(floats[t], twice(xs[t], like))
                s.synchronize()  # allowed while other threads capture: their captures are thread_local
                if not (ints[t] == value).all() or not (floats[t] == 2 * (t + 1)).all():
                    wrong.append((t, i, ints[t].copy(), floats[t].copy()))

    errors = run_threads(work, threads)
    assert not errors, errors
    assert not wrong, wrong[:3]
    for fn in (fill, twice):
        st = fn.stats
        assert st.replays + st.instantiations + st.updates == threads * calls, st


def test_captured_calls_from_threads_in_global_mode(device, short_switch_interval):
    """Global captures forbid synchronizing everywhere while they run: the threads only call, and the
    results are read once all have finished. Each thread's last returned Array is its own."""
    threads, calls = 4, 40
    fill, twice = threaded_functions(device, "global")
    like = device.zeros(N, np.float32)
    outs = [device.zeros(N, np.int32) for _ in range(threads)]
    xs = [K.f32(device, np.full(N, t + 1.0)) for t in range(threads)]
    streams = [device.stream() for _ in range(threads)]
    results: list = [None] * threads

    def work(t):
        with gg.use_stream(streams[t]):
            for i in range(calls):
                fill(outs[t], 1000 * t + i, like)
                results[t] = twice(xs[t], like)

    errors = run_threads(work, threads)
    assert not errors, errors
    for t in range(threads):
        streams[t].synchronize()
        np.testing.assert_array_equal(outs[t].to_numpy(), 1000 * t + calls - 1)
        np.testing.assert_array_equal(results[t].to_numpy(), 2 * (t + 1))
    assert len({r.ptr for r in results}) == threads  # graph memory per thread


def test_captured_function_keyed_by_value_from_threads(device, short_switch_interval):
    """A new key in each call (recapture, update in place, LRU) from several threads: no internal error, no
    stuck capture, every call's result right."""
    threads, calls = 3, 30

    @gg.captured(max_graphs=2, mode="thread_local")
    def scaled(x, factor):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, factor, N)
        return factor

    xs = [device.zeros(N, np.float32) for _ in range(threads)]
    streams = [device.stream() for _ in range(threads)]
    hosts = [device.pinned(N, np.float32) for _ in range(threads)]
    wrong: list[tuple] = []

    def work(t):
        s = streams[t]
        with gg.use_stream(s):
            for i in range(calls):
                factor = float(2 + (i + t) % 5)
                s.memset(xs[t], 1.0)
                if scaled(xs[t], factor) != factor:
                    wrong.append((t, i, "returned value"))
                s.memcpy(hosts[t], xs[t])
                s.synchronize()
                if not (hosts[t] == factor).all():
                    wrong.append((t, i, hosts[t].copy()))

    errors = run_threads(work, threads)
    assert not errors, errors
    assert not wrong, wrong[:3]
    assert_usable(device, device.stream())


# A node turned off stays off through an update, and is never embedded on by a capture


def on_off_graphs(device: gg.Device, x: gg.Array) -> tuple[gg.Graph, gg.Node, gg.Graph]:
    graphs, nodes = [], []
    for value in (1.0, 2.0):
        g = gg.Graph(device)
        nodes.append(g.add_memset(x, value))
        graphs.append(g)
    return graphs[0], nodes[0], graphs[1]


def test_a_node_turned_off_stays_off_through_an_update(device, stream):
    x = device.zeros(N, np.float32)
    g1, node, g2 = on_off_graphs(device, x)
    with g1.instantiate() as exe:
        exe.set_enabled(node, False)
        exe.update(g2)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), 0.0)
        exe.set_enabled(node, True)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), 2.0)


def test_an_exec_with_a_node_off_is_not_launched_into_a_capture_after_an_update(device, stream):
    """An exec with a node turned off, then updated, is refused as a capture's child graph (the child would run
    the node the direct launch skips); turned on and updated again, it is captured and runs as launched."""
    x = device.zeros(N, np.float32)
    g1, node, g2 = on_off_graphs(device, x)
    with g1.instantiate() as exe:
        exe.set_enabled(node, False)
        exe.update(g2)
        with pytest.raises(gg.CaptureError, match=r"GraphExec\.launch: an executable graph with a node turned off "
                                                  r"by set_enabled \(an update keeps it off\) cannot be launched "
                                                  r"into a capture"):
            with stream.capture():
                exe.launch(stream)
        K.launch_and_wait(exe, stream)  # the direct launch: the node is off
        np.testing.assert_array_equal(x.to_numpy(), 0.0)
        exe.set_enabled(node, True)
        exe.update(g2)  # on again and updated: the exec is its graph's instantiation again
        with stream.capture() as cap:
            exe.launch(stream)
    with cap.graph.instantiate() as replay:
        K.launch_and_wait(replay, stream)
    np.testing.assert_array_equal(x.to_numpy(), 2.0)


# Options checked where they are given


@pytest.mark.parametrize("value", ["no", "", 0, 1, None, np.int32(0), 0.0])
def test_set_enabled_takes_bools_only(device, stream, value):
    x = device.zeros(N, np.float32)
    g, node, _ = on_off_graphs(device, x)
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=rf"^set_enabled\(enabled\): expected a bool \(True or False\), got "
                                            rf"{re.escape(repr(value))} \({type(value).__name__}\)$"):
            exe.set_enabled(node, value)
        with stream.capture():  # the refused call changed nothing: still launchable into a capture
            exe.launch(stream)
        exe.set_enabled(node, np.bool_(False))  # NumPy's bool is a bool
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), 0.0)


@pytest.mark.parametrize("mode", ["bogus", None, "GLOBAL", 1])
def test_captured_refuses_an_unknown_mode_when_decorating(mode):
    message = rf"^captured\(mode\): expected one of global, thread_local, relaxed, got {re.escape(repr(mode))}$"
    with pytest.raises(ValueError, match=message):
        gg.captured(mode=mode)
    with pytest.raises(ValueError, match=message):
        gg.captured(lambda x: x, mode=mode)
