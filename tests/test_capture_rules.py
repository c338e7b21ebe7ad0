"""The rules a stream capture enforces (CUDA's): what each mode forbids from which thread, the calls that
are invalid in every mode, cross-stream mistakes, nesting, the legacy default stream, and CaptureError's
first-error guarantee with the traceback of the offending line.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

MODES = ["global", "thread_local", "relaxed"]
N = 16
GRID, BLOCK = K.launch_1d(N)
THIS_FILE = os.path.basename(__file__)

UNSAFE_RULE = ("synchronous allocations and copies are forbidden while a 'global' capture runs, or in the "
               "thread of a 'thread_local' one")
STREAM_WAIT_RULE = "a capturing stream runs nothing, so it cannot be waited for or queried"
EVENT_RULE = "the event was last recorded inside a capture, so it marks work that has not run and cannot be waited for"
LEGACY_RULE = "the legacy default stream synchronizes with blocking streams, and a blocking stream is capturing"


def device_rule(device: gg.Device) -> str:
    return f"{device} has a capturing stream, which runs nothing, so the device cannot be waited for"


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("raised", exception)."""
    try:
        return "ok", fn()
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return "raised", exc


def outcome_in_thread(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``outcome(fn)`` computed in a new thread."""
    box: list[tuple[str, Any]] = []
    thread = threading.Thread(target=lambda: box.append(outcome(fn)))
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    return box[0]


# Modes: the "potentially unsafe" synchronous calls


def capture_message(api: str, rule: str | None, stream: gg.Stream, mode: str) -> str:
    """The first line of the CaptureError of a refused call, as a regex (``rule=None``: any rule text)."""
    return (re.escape(f"{api}: ") + (".*" if rule is None else re.escape(rule))
            + re.escape(f" (capture on {stream!r}, mode '{mode}'); the capture is invalidated"))


# api -> (make the call's callable before the capture, the rule its refusal states or None for any text).
# Waiting for a stream or event that is not part of the capture is "potentially unsafe" like a synchronous
# allocation or copy (CUDA refuses cudaStreamSynchronize/cudaEventSynchronize in a global capture).
UNSAFE_CALLS = {
    "Device.empty": (lambda d: lambda: d.empty(4, np.float32), UNSAFE_RULE),
    "Device.zeros": (lambda d: lambda: d.zeros(4, np.float32), UNSAFE_RULE),
    "Device.asarray": (lambda d: lambda: d.asarray([1.0, 2.0, 3.0, 4.0]), UNSAFE_RULE),
    "Device.pinned": (lambda d: lambda: d.pinned(4, np.float32), UNSAFE_RULE),
    "Stream.synchronize": (lambda d: d.stream().synchronize, None),          # another, non-capturing stream
    "Event.synchronize": (lambda d: d.stream().record().synchronize, None),  # recorded outside the capture
}

# Whether the call is refused: (capture mode, calling thread) -> refused.
UNSAFE_REFUSED = {
    ("global", "capturing thread"): True,
    ("global", "other thread"): True,
    ("thread_local", "capturing thread"): True,
    ("thread_local", "other thread"): False,
    ("relaxed", "capturing thread"): False,
    ("relaxed", "other thread"): False,
}


@pytest.mark.parametrize("thread", ["capturing thread", "other thread"])
@pytest.mark.parametrize("api", list(UNSAFE_CALLS))
@pytest.mark.parametrize("mode", MODES)
def test_unsafe_calls_by_mode_and_thread(device, stream, mode, api, thread):
    make, rule = UNSAFE_CALLS[api]
    call = make(device)
    x = device.zeros(N, np.float32)
    refused = UNSAFE_REFUSED[(mode, thread)]
    run = outcome if thread == "capturing thread" else outcome_in_thread

    def body():
        with stream.capture(mode=mode) as cap:
            stream.memset(x, 2.0)
            result = run(call)
            assert stream.is_capturing  # a refused call invalidates but does not end the capture
        return cap, result

    if not refused:
        cap, (status, value) = body()
        assert status == "ok", value
        if api.startswith("Device."):
            assert value.shape == (4,)
        if api == "Device.asarray":
            np.testing.assert_array_equal(value.to_numpy(), [1.0, 2.0, 3.0, 4.0])
        if api == "Device.zeros":
            np.testing.assert_array_equal(value.to_numpy(), np.zeros(4, np.float32))
        assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.MEMSET]
        return

    with pytest.raises(gg.CaptureError, match=capture_message(api, rule, stream, mode)) as end:
        status, value = body()[1]
        assert status == "raised"
    # The call itself raised a CaptureError at once, and the with exit raises one naming it.
    assert end.value.api == api
    assert end.value.mode == mode
    assert end.value.stream is stream
    assert not stream.is_capturing
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))  # the memset never ran


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("thread", ["capturing thread", "other thread"])
def test_refused_call_raises_capture_error_at_once(device, stream, mode, thread):
    run = outcome if thread == "capturing thread" else outcome_in_thread
    with pytest.raises(gg.CaptureError):
        with stream.capture(mode=mode):
            status, error = run(device.synchronize)
            assert status == "raised"
            assert type(error) is gg.CaptureError
            assert error.api == "Device.synchronize" and error.mode == mode and error.stream is stream
            assert str(error).startswith(f"Device.synchronize: {device_rule(device)}")


@contextlib.contextmanager
def capture_in_thread(stream: gg.Stream, mode: str, work: Callable[[], Any] = lambda: None):
    """Hold a capture of ``stream`` in ``mode``, begun on another thread (which does ``work`` in it), open for the
    block; yields the list that gets the ended Capture, or the exception that ended it."""
    started, release = threading.Event(), threading.Event()
    box: list[Any] = []

    def run():
        try:
            with stream.capture(mode=mode) as cap:
                work()
                started.set()
                release.wait(30)
            box.append(cap)
        except Exception as exc:  # noqa: BLE001
            box.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(30)
        yield box
    finally:
        release.set()
        thread.join(30)


def test_thread_local_capture_in_another_thread_does_not_restrict_this_one(device):
    stream = device.stream()
    x = device.zeros(N, np.float32)
    with capture_in_thread(stream, "thread_local", lambda: stream.memset(x, 1.0)) as box:
        assert stream.is_capturing
        y = device.asarray(np.arange(4, dtype=np.float32))  # allowed: the capture is another thread's
    assert isinstance(box[0], gg.Capture), box
    assert len(box[0].graph) == 1
    np.testing.assert_array_equal(y.to_numpy(), np.arange(4, dtype=np.float32))


def test_global_capture_in_another_thread_restricts_this_one(device):
    stream = device.stream()
    with capture_in_thread(stream, "global") as box:
        with pytest.raises(gg.CaptureError, match=capture_message("Device.empty", UNSAFE_RULE, stream, "global")):
            device.empty(4)
    assert isinstance(box[0], gg.CaptureError) and box[0].api == "Device.empty"


def test_default_mode_is_global(device, stream):
    with pytest.raises(gg.CaptureError, match=capture_message("Device.empty", UNSAFE_RULE, stream, "global")):
        with stream.capture() as cap:
            assert cap.mode == "global"
            status, error = outcome_in_thread(lambda: device.empty(1))  # refused in other threads: global
            assert status == "raised" and error.mode == "global"


@pytest.mark.parametrize("mode", ["", "Global", "GLOBAL", "threadlocal", "strict", None])
def test_invalid_mode_is_a_value_error(device, stream, mode):
    with pytest.raises(ValueError, match=re.escape(f"capture(mode): expected one of global, thread_local, "
                                                   f"relaxed, got {mode!r}")):
        stream.capture(mode=mode)
    assert not stream.is_capturing


# Calls that are invalid in every mode, from any thread


def _always_invalid_calls(device, stream, x, event):
    return {
        "Stream.synchronize": (stream.synchronize, STREAM_WAIT_RULE),
        "Stream.done": (lambda: stream.done, STREAM_WAIT_RULE),
        "Event.synchronize": (event.synchronize, EVENT_RULE),
        "Event.done": (lambda: event.done, EVENT_RULE),
        "Device.synchronize": (device.synchronize, device_rule(device)),
        "Array.to_numpy": (x.to_numpy, device_rule(device)),
    }


ALWAYS_INVALID = ["Stream.synchronize", "Stream.done", "Event.synchronize", "Event.done",
                  "Device.synchronize", "Array.to_numpy"]


@pytest.mark.parametrize("thread", ["capturing thread", "other thread"])
@pytest.mark.parametrize("api", ALWAYS_INVALID)
@pytest.mark.parametrize("mode", MODES)
def test_always_invalid_calls(device, stream, mode, api, thread):
    x = device.zeros(N, np.float32)
    run = outcome if thread == "capturing thread" else outcome_in_thread
    with pytest.raises(gg.CaptureError) as end:
        with stream.capture(mode=mode):
            stream.memset(x, 3.0)
            event = stream.record()
            call, rule = _always_invalid_calls(device, stream, x, event)[api]
            status, error = run(call)
            assert status == "raised"
            assert type(error) is gg.CaptureError
            assert re.match(capture_message(api, rule, stream, mode), str(error))
            assert error.api == api and error.mode == mode and error.stream is stream
    # The exception reached the with exit from the thread that made the call, or from the exit itself.
    assert re.match(capture_message(api, rule, stream, mode), str(end.value))
    assert end.value.api == api
    assert not stream.is_capturing
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))
    stream.memset(x, 1.0)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))


def test_outside_work_can_be_waited_for_in_a_relaxed_capture(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    other.memset(x, 5.0)
    before = other.record()
    with stream.capture(mode="relaxed") as cap:
        before.synchronize()
        other.synchronize()
        assert before.done and other.done
        stream.memset(x, 1.0)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5.0, np.float32))
    assert len(cap.graph) == 1


# Cross-stream mistakes


def test_unjoined_forked_stream_is_an_error_at_the_end(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    message = re.escape(f"capture end: {other!r} forked from the capture through an event but its work was "
                        f"not joined back into {stream!r} (record an event on it and wait for that event on "
                        f"the capturing stream)")
    with pytest.raises(gg.CaptureError, match=message) as info:
        with stream.capture() as cap:
            stream.memset(x, 1.0)
            other.wait(stream.record())
            assert other.is_capturing
            other.launch(K.scale, GRID, BLOCK, x, 2.0, N)
    assert info.value.api == "Stream.capture (end)"
    assert info.value.stream is stream and info.value.mode == "global"
    assert not stream.is_capturing and not other.is_capturing
    assert cap.graph is None
    other.memset(x, 7.0)  # both streams run work again
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7.0, np.float32))


def test_fork_without_work_needs_no_join(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        other.wait(stream.record())  # forked, but records nothing: nothing to join
    assert not other.is_capturing
    assert len(cap.graph) == 1


def test_joined_forks_stay_joined_after_set_dependencies(device, stream):
    """Forks joined back stay joined when the frontier moves to an explicit node that does not follow the joins
    (the combined approach with a node placed by hand): fork two streams, join both, place the node, set the
    dependencies to it. CUDA accepts it
    (tools/probes/gpu_probe_rules.py cases 1a, 1b); the graph runs with every node in its order."""
    left, right = device.stream(), device.stream()
    x, y, z = device.zeros(N, np.float32), device.zeros(N, np.float32), device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        (first,) = cap.dependencies
        fork = stream.record()
        left.wait(fork)
        right.wait(fork)
        left.launch(K.scale, GRID, BLOCK, x, 3.0, N)
        right.memset(y, 2.0)
        stream.wait(left.record())
        stream.wait(right.record())
        placed = cap.graph.add_memset(z, 4.0, after=[first])  # after the first node only
        cap.set_dependencies([placed])
        stream.launch(K.scale, GRID, BLOCK, z, 2.0, N)
    assert len(cap.graph) == 5
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 2.0, np.float32))
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 8.0, np.float32))


def test_a_join_counts_even_when_the_frontier_moves_away_from_it(device, stream):
    """Joined, then the frontier set to an unrelated root: still joined (CUDA case 1b)."""
    other = device.stream()
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        other.wait(stream.record())
        other.launch(K.scale, GRID, BLOCK, x, 2.0, N)
        stream.wait(other.record())
        cap.set_dependencies([])
        root = cap.add_empty()
    assert root.dependencies == ()
    assert len(cap.graph) == 3


def test_a_fork_without_work_needs_no_join_after_the_frontier_moves(device, stream):
    """Forked, no work, never joined, and the frontier moved to a root (CUDA case 1i)."""
    other = device.stream()
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        other.wait(stream.record())
        cap.set_dependencies([])
    assert len(cap.graph) == 1


def test_a_join_through_a_third_stream_counts(device, stream):
    """a -> b -> c; c joins b, then b joins a (CUDA case 1g)."""
    b, c = device.stream(), device.stream()
    x, y = device.zeros(N, np.float32), device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        b.wait(stream.record())
        c.wait(b.record())
        c.memset(y, 4.0)
        b.wait(c.record())
        b.launch(K.scale, GRID, BLOCK, x, 5.0, N)
        stream.wait(b.record())
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5.0, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 4.0, np.float32))


@pytest.mark.parametrize("case", ["work after the join", "joined into a side stream only"])
def test_work_never_waited_for_by_the_capturing_side_is_unjoined(device, stream, case):
    """More work after the join (CUDA case 1e), or a join into a stream that never joins back (case 1h)."""
    b, c = device.stream(), device.stream()
    x = device.zeros(N, np.float32)
    unjoined = repr(b) if case == "work after the join" else f"{b!r}, {c!r}"  # c's work reached b only
    with pytest.raises(gg.CaptureError, match=re.escape(f"capture end: {unjoined} forked")):
        with stream.capture() as cap:
            stream.memset(x, 1.0)
            b.wait(stream.record())
            b.memset(x, 2.0)
            if case == "work after the join":
                stream.wait(b.record())
                b.memset(x, 3.0)
                cap.set_dependencies([])
            else:
                c.wait(stream.record())
                c.memset(x, 4.0)
                b.wait(c.record())
    assert not b.is_capturing and not c.is_capturing


def test_only_the_unjoined_stream_is_named(device, stream):
    joined, unjoined = device.stream(), device.stream()
    x = device.zeros(N, np.float32)
    with pytest.raises(gg.CaptureError, match=re.escape(f"capture end: {unjoined!r} forked")) as info:
        with stream.capture():
            fork = stream.record()
            joined.wait(fork)
            unjoined.wait(fork)
            joined.memset(x, 1.0)
            unjoined.memset(x, 2.0)
            stream.wait(joined.record())
    assert repr(joined) not in str(info.value)
    assert not joined.is_capturing and not unjoined.is_capturing


def test_forked_stream_cannot_be_synchronized_nor_capture_again(device, stream):
    other = device.stream()
    with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.capture: {other!r} is already capturing")):
        with stream.capture():
            other.wait(stream.record())
            other.capture().__enter__()
    with pytest.raises(gg.CaptureError, match=capture_message("Stream.synchronize", STREAM_WAIT_RULE, stream,
                                                              "relaxed")) as info:
        with stream.capture(mode="relaxed"):
            other.wait(stream.record())
            other.synchronize()
    assert info.value.stream is stream  # the capture's stream: the one the capture began on
    assert not stream.is_capturing and not other.is_capturing


def test_waiting_on_an_event_recorded_outside_the_capture(device, stream):
    other = device.stream()
    outside = other.record()
    message = capture_message("Stream.wait", "a capturing stream cannot wait for an event recorded outside "
                              "the capture", stream, "global")
    with pytest.raises(gg.CaptureError, match=message) as info:
        with stream.capture():
            stream.wait(outside)
    assert info.value.api == "Stream.wait"
    assert not stream.is_capturing


@pytest.mark.parametrize("nested", [False, True], ids=["node", "child-graph-node"])
def test_an_event_recorded_again_by_a_graph_launched_outside_the_capture_is_not_the_captures(device, stream,
                                                                                           nested):
    """Recorded in a capture, then by an event-record node of a graph launched outside it: a wait on the event
    is a plain wait (the driver forks nothing there: probed on the H200), so joining back is refused."""
    second, third = device.stream(), device.stream()
    event = device.event()
    graph = gg.Graph(device)
    if nested:
        child = gg.Graph(device)
        child.add_event_record(event)
        graph.add_child(child)
    else:
        graph.add_event_record(event)
    exe = graph.instantiate()
    message = capture_message("Stream.wait", "a capturing stream cannot wait for an event recorded outside "
                              "the capture", stream, "relaxed")
    with pytest.raises(gg.CaptureError, match=message):
        with stream.capture(mode="relaxed"):
            stream.record(event)
            exe.launch(second)
            third.wait(event)
            assert not third.is_capturing  # a plain wait: no fork
            stream.wait(third.record())
    assert not stream.is_capturing and not third.is_capturing
    second.synchronize()
    third.synchronize()
    assert event.done


def test_merging_two_captures_is_an_error(device, stream):
    second = device.stream()
    x = device.zeros(N, np.float32)
    message = capture_message("Stream.wait", "the event was recorded in another capture; two captures cannot "
                              "merge", stream, "global")
    with pytest.raises(gg.CaptureError, match=message) as info:
        with stream.capture() as cap1:
            with second.capture(mode="relaxed") as cap2:
                second.memset(x, 1.0)
                stream.wait(second.record())
    assert info.value.api == "Stream.wait"
    assert not stream.is_capturing and not second.is_capturing
    assert cap1.error is not None and cap2.error is cap1.error  # both captures are invalidated


# Nesting and the legacy default stream


NEST_RULE = "{stream!r} is already capturing; captures cannot nest on one stream"


def test_nested_capture_on_one_stream(device, stream):
    message = capture_message("Stream.capture", NEST_RULE.format(stream=stream), stream, "global")
    with pytest.raises(gg.CaptureError, match=message + re.escape("; end it first, or begin this capture on another "
                                                                  "stream")) as info:
        with stream.capture():
            with stream.capture(mode="relaxed"):
                pass
    assert info.value.api == "Stream.capture"
    assert not stream.is_capturing


def test_a_refused_nested_capture_invalidates_the_running_one(device, stream):
    """Caught or not, a nested capture refused invalidates the capture, as every refused call does: its end raises
    the nested capture's error, and no graph comes of it."""
    x = device.zeros(N, np.float32)
    with pytest.raises(gg.CaptureError, match=capture_message("Stream.capture", NEST_RULE.format(stream=stream),
                                                              stream, "thread_local")) as info:
        with stream.capture(mode="thread_local") as cap:
            stream.memset(x, 1.0)
            inner = stream.capture()
            with pytest.raises(gg.CaptureError, match=r"^Stream\.capture: ") as refused:
                inner.__enter__()
            with pytest.raises(gg.CaptureError, match=r"invalidated earlier by Stream\.capture"):
                stream.memset(x, 2.0)
    assert info.value.api == "Stream.capture" and refused.value.api == "Stream.capture"
    assert "inner.__enter__()" in info.value.where
    assert cap.graph is None and not stream.is_capturing
    with stream.capture() as again:  # the stream captures again, and the Capture refused was never begun
        stream.memset(x, 3.0)
    assert len(again.graph) == 1 and not inner.active


def test_two_streams_may_capture_at_once(device, stream):
    second = device.stream()
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    with stream.capture(mode="relaxed") as a:
        with second.capture(mode="relaxed") as b:
            stream.memset(x, 1.0)
            second.memset(y, 2.0)
    assert len(a.graph) == 1 and len(b.graph) == 1
    with a.graph.instantiate() as exe_a, b.graph.instantiate() as exe_b:
        exe_a.launch(stream)
        exe_b.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy() + y.to_numpy(), np.full(N, 3.0, np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_legacy_stream_cannot_say_whether_it_captures_while_a_blocking_stream_does(device, mode):
    """CUDA answers cudaStreamIsCapturing(0) with cudaErrorStreamCaptureImplicit while a blocking stream
    captures, in every mode, and the capture goes on (tools/probes/gpu_probe_rules.py cases 6a-6g)."""
    blocking, legacy = device.stream(non_blocking=False), device.default_stream
    x = device.zeros(N, np.float32)
    with blocking.capture(mode=mode) as cap:
        with pytest.raises(gg.CaptureError, match=re.escape(
                f"Stream.is_capturing: {LEGACY_RULE} (capture on {blocking!r}, mode {mode!r})")) as info:
            legacy.is_capturing
        assert info.value.api == "Stream.is_capturing" and info.value.stream is blocking
        blocking.memset(x, 3.0)  # not invalidated
    assert cap.error is None and len(cap.graph) == 1
    assert legacy.is_capturing is False


def test_legacy_stream_is_not_capturing_while_a_non_blocking_stream_captures(device, stream):
    with stream.capture():
        assert device.default_stream.is_capturing is False


def test_default_stream_cannot_be_captured(device):
    legacy = device.default_stream
    with pytest.raises(gg.CaptureError, match=re.escape("capture: the legacy default stream cannot be "
                                                        "captured; use Device.stream()")) as info:
        with legacy.capture():
            pass
    assert info.value.api == "Stream.capture"
    assert not legacy.is_capturing


@pytest.mark.parametrize("api", ["memset", "launch", "host", "record"])
def test_default_stream_refused_while_a_blocking_stream_captures(device, api):
    blocking = device.stream(non_blocking=False)
    legacy = device.default_stream
    x = device.zeros(N, np.float32)
    use = {"memset": lambda: legacy.memset(x, 2.0),
           "launch": lambda: legacy.launch(K.scale, GRID, BLOCK, x, 2.0, N),
           "host": lambda: legacy.host(print, "never"),
           "record": lambda: legacy.record()}[api]
    with pytest.raises(gg.CaptureError, match=capture_message(f"Stream.{api}", LEGACY_RULE, blocking,
                                                              "global")) as info:
        with blocking.capture():
            blocking.memset(x, 1.0)
            use()
    assert info.value.stream is blocking
    assert not blocking.is_capturing
    legacy.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))


def test_default_stream_refusal_invalidates_the_blocking_capture(device):
    blocking = device.stream(non_blocking=False)
    x = device.zeros(N, np.float32)
    with pytest.raises(gg.CaptureError, match=capture_message("Stream.memset", LEGACY_RULE, blocking,
                                                              "relaxed")) as end:
        with blocking.capture(mode="relaxed"):
            with pytest.raises(gg.CaptureError):
                device.default_stream.memset(x, 2.0)
    assert end.value.api == "Stream.memset"


@pytest.mark.parametrize("api", ["synchronize", "done"])
def test_default_stream_synchronize_refused_while_a_blocking_stream_captures(device, api):
    blocking = device.stream(non_blocking=False)
    legacy = device.default_stream
    with pytest.raises(gg.CaptureError, match=capture_message(f"Stream.{api}", LEGACY_RULE, blocking,
                                                              "global")):
        with blocking.capture():
            if api == "synchronize":
                legacy.synchronize()
            else:
                legacy.done


@pytest.mark.parametrize("mode", MODES)
def test_default_stream_usable_while_a_non_blocking_stream_captures(device, stream, mode):
    assert stream.non_blocking
    legacy = device.default_stream
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    host = device.pinned(N, np.float32)
    with stream.capture(mode=mode) as cap:
        stream.memset(x, 1.0)
        legacy.memset(y, 2.0)
        legacy.launch(K.scale, GRID, BLOCK, y, 3.0, N)
        if mode == "relaxed":  # waiting for a stream is potentially unsafe in the other modes
            legacy.memcpy(host, y)
            legacy.synchronize()
            np.testing.assert_array_equal(host, np.full(N, 6.0, np.float32))  # ran during the capture
    legacy.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 6.0, np.float32))  # ran, was not recorded
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))      # was only recorded
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.MEMSET]


# First error and where it was made


def test_capture_error_fields_and_traceback(device, stream):
    x = device.zeros(N, np.float32)
    with pytest.raises(gg.CaptureError) as info:
        with stream.capture(mode="thread_local"):
            stream.memset(x, 1.0)
            stream.synchronize()  # the offending line
    error = info.value
    assert error.api == "Stream.synchronize"
    assert error.mode == "thread_local"
    assert error.stream is stream
    assert THIS_FILE in error.where
    assert "stream.synchronize()  # the offending line" in error.where
    assert "test_capture_error_fields_and_traceback" in error.where
    assert os.path.dirname(os.path.abspath(gg.__file__)) not in error.where  # gpugraph's frames left out
    assert str(error).startswith(f"Stream.synchronize: {STREAM_WAIT_RULE} (capture on {stream!r}, "
                                 f"mode 'thread_local'); the capture is invalidated\n"
                                 f"The offending call was made here:\n")
    assert str(error).endswith(error.where)


def test_later_calls_repeat_the_first_error_and_the_exit_raises_it(device, stream):
    x = device.zeros(N, np.float32)
    later = "the capture was invalidated earlier by Stream.synchronize: Stream.synchronize: "
    with pytest.raises(gg.CaptureError) as end:
        with stream.capture() as cap:
            stream.memset(x, 1.0)
            with pytest.raises(gg.CaptureError) as first:
                stream.synchronize()  # first offending call
            with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.memset: {later}")) as second:
                stream.memset(x, 2.0)
            assert second.value.api == "Stream.synchronize"
            with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.launch: {later}")):
                stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)
            with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.synchronize: {later}")):
                stream.synchronize()
            with pytest.raises(gg.CaptureError, match=re.escape(f"Capture.add_empty: {later}")):
                cap.add_empty()
            with pytest.raises(gg.CaptureError, match=re.escape(f"Capture.dependencies: {later}")):
                cap.dependencies
            with pytest.raises(gg.CaptureError, match=re.escape(f"Stream.record: {later}")):
                stream.record()
            assert cap.error is first.value
    # The exit raises a CaptureError for the first call, not for the later ones.
    error = end.value
    assert error.api == "Stream.synchronize"
    assert error.where == first.value.where
    assert "stream.synchronize()  # first offending call" in error.where
    assert str(error).count("The offending call was made here") == 1
    assert "invalidated earlier" not in str(error)
    assert str(error).startswith(f"Stream.synchronize: {STREAM_WAIT_RULE}")
    assert not stream.is_capturing
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))


def test_uncaught_later_call_still_names_the_first(device, stream):
    x = device.zeros(N, np.float32)
    with pytest.raises(gg.CaptureError, match=re.escape("Stream.memset: the capture was invalidated earlier "
                                                        "by Device.synchronize")) as info:
        with stream.capture():
            with contextlib.suppress(gg.CaptureError):
                device.synchronize()
            stream.memset(x, 1.0)
    assert info.value.api == "Device.synchronize"
    assert not stream.is_capturing


def test_refused_call_from_another_thread_names_it_at_the_exit(device, stream):
    with pytest.raises(gg.CaptureError, match=capture_message("Device.zeros", UNSAFE_RULE, stream,
                                                              "global")) as info:
        with stream.capture():
            status, error = outcome_in_thread(lambda: device.zeros(4))
            assert status == "raised" and error.api == "Device.zeros"
    assert info.value.api == "Device.zeros"
    assert "lambda: device.zeros(4)" in info.value.where
    assert THIS_FILE in info.value.where


def test_legacy_default_stream_cannot_join_a_capture(device, stream):
    with pytest.raises(gg.CaptureError, match="the legacy default stream cannot join a capture"):
        with stream.capture():
            device.default_stream.wait(stream.record())
    assert not device.default_stream.is_capturing and not stream.is_capturing


def test_a_capture_object_is_entered_once(device, stream):
    cap = stream.capture()
    with cap:
        pass
    with pytest.raises(gg.CaptureError, match="this Capture was used already"):
        with cap:
            pass
    assert not stream.is_capturing


@pytest.mark.parametrize("thread_mode", ["thread_local", "relaxed"])
def test_a_thread_not_in_global_mode_ignores_other_threads_global_captures(device, thread_mode):
    """hipThreadExchangeStreamCaptureMode: the calling thread's mode says which captures forbid its unsafe calls."""
    stream = device.stream()
    with capture_in_thread(stream, "global") as box:
        with gg.thread_capture_mode(thread_mode):
            y = device.asarray(np.arange(4, dtype=np.float32))  # allowed: this thread ignores the global capture
        assert gg.exchange_capture_mode("global") == "global"  # (the block put the old mode back)
    assert isinstance(box[0], gg.Capture), box
    np.testing.assert_array_equal(y.to_numpy(), np.arange(4, dtype=np.float32))


def test_a_relaxed_thread_may_make_unsafe_calls_in_its_own_capture(device, stream):
    with stream.capture(mode="thread_local") as cap:
        previous = gg.exchange_capture_mode("relaxed")
        try:
            y = device.zeros(4, np.float32)  # a synchronous allocation, forbidden in the thread_local mode
        finally:
            assert gg.exchange_capture_mode(previous) == "relaxed"
        stream.memset(y, 2.0)
    assert cap.error is None and len(cap.graph) == 1
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2.0, np.float32))
    with pytest.raises(ValueError, match=r"exchange_capture_mode\(mode\): expected one of global, thread_local, "
                                         r"relaxed, got 'loose'"):
        gg.exchange_capture_mode("loose")
