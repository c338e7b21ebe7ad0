"""The rules of which calls a running stream capture forbids, and the record of the captures running.

The rules are CUDA's (cudaStreamBeginCapture, "Prohibited and unhandled operations"):

* Always invalid while a stream captures, in every mode: synchronizing or querying a capturing stream,
  an event last recorded inside a capture, or the device; waiting from a capturing stream on an event
  recorded outside any capture; merging two captures through an event; using the legacy default stream
  while a blocking stream captures; beginning a second capture on a capturing stream.
* "Potentially unsafe" calls (synchronous allocation, synchronous copies, waiting for or querying a stream
  or event outside the capture, stream-ordered allocation on a stream that is not capturing, and
  instantiating a graph) are forbidden to the thread that began a ``global`` or ``thread_local`` capture,
  and to every thread while any ``global`` capture runs; ``relaxed`` captures forbid them to no one. (The
  H200's driver answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED to each of these from another thread and
  invalidates the global capture: tools/probes/gpu_probe_threads.py.) ``unsafe_section`` lets gpugraph make such a
  call for the user (``@captured`` instantiating its graph) once no other thread's global capture runs.

A forbidden call raises CaptureError at once and invalidates the capture: the error names the call, the
stream and the mode, and carries the traceback of the offending line. Later calls on the invalidated
capture raise a CaptureError that repeats the first one, so the first cause is never buried.

The capture itself is gpugraph._capture's ``Capture``, which sits above these rules: it notes itself in
``active`` while it runs, and the rules read of it only what ``RunningCapture`` names.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ._device_like import DeviceLike
from ._errors import CaptureError
from ._host_threads import HOST_THREADS, refuse_in_host_function
from .backends import available_backends, get_backend


class RunningCapture(Protocol):
    """What the rules read and write of a capture (a gpugraph._capture.Capture)."""

    stream: Any
    mode: str
    thread: int  # the ident of the thread that made it
    streams: list[Any]  # the streams recording into it: its own first, then those forked to it
    error: CaptureError | None  # the first error that invalidated it


MODES = ("global", "thread_local", "relaxed")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Guards active. Held from a capture's beginning in the backend to its noting in active, and through an
# unsafe_section, so that no capture begins unnoted while gpugraph makes a potentially unsafe call itself.
lock = threading.RLock()
ended = threading.Condition(lock)  # notified when a capture leaves active
active: list[RunningCapture] = []  # the captures running, in the order they began
# Threads now capturing a ``@captured`` function, each with its Capture: the function's work must go to the
# capturing stream, since work on any other stream of the device would run once and stay out of the graph.
function_captures: dict[int, RunningCapture] = {}


def user_stack() -> str:
    """The caller's stack, without gpugraph's own frames: where the user made the call."""
    frames = [f for f in traceback.extract_stack()
              if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR + os.sep)]
    return "".join(traceback.format_list(frames[-6:])).rstrip()


def invalidate(captures: Iterable[RunningCapture], api: str, rule: str, instead: str = "") -> CaptureError:
    """Mark ``captures`` invalidated by ``api`` and return the error to raise (``instead``: what to do instead,
    when there is a way)."""
    captures = list(captures)
    first = captures[0]
    error = CaptureError(f"{api}: {rule} (capture on {first.stream!r}, mode {first.mode!r}); "
                         f"the capture is invalidated" + (f"; {instead}" if instead else ""),
                         api=api, stream=first.stream, mode=first.mode, where=user_stack())
    for capture in captures:
        if capture.error is None:
            capture.error = error
    return error


_UNSAFE = ("synchronous allocations and copies are forbidden while a 'global' capture runs, or in the "
           "thread of a 'thread_local' one")

# What to do instead of a synchronous allocation under capture, by call: allocate in stream order, which the
# capture records, or before the capture.
_STREAM_ALLOC = ("use stream.alloc(shape, dtype) instead: a stream-ordered allocation on the capturing stream "
                 "(gg.current_stream() in a @captured function), which the capture records as a graph allocation "
                 "node")
_INSTEAD = {
    "Device.empty": _STREAM_ALLOC,
    "Device.zeros": _STREAM_ALLOC + ", then stream.memset(array, 0) on the same stream",
    "Device.asarray": "copy the host data to the device before the capture and use that Array inside",
    "Device.pinned": "allocate page-locked memory before the capture and use it inside (it has no "
                     "stream-ordered form)",
}


INSTANTIATE_RULE = ("instantiating a graph is forbidden while a 'global' capture runs, or in the thread of a "
                    "'thread_local' one")
# Waiting for or querying a stream or an event.
WAIT_RULE = ("waiting for or querying work outside the capture is forbidden while a 'global' capture runs, or "
             "in the thread of a 'thread_local' one")


_thread = threading.local()  # ``mode``: the thread's capture interaction mode, when not "global"


def check_mode(mode: object, what: str) -> None:
    """Refuse a capture mode (or thread interaction mode) other than those of ``MODES``, naming the call ``what``."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{what}(mode): expected one of {', '.join(MODES)}, got {mode!r}")


def exchange_capture_mode(mode: str) -> str:
    """Set the calling thread's capture interaction mode and return the one it replaces ("global" at first).

    It says which running captures forbid this thread's potentially unsafe calls (synchronous allocations,
    copies and waits, instantiating): "global", its own captures but relaxed ones, and every thread's global
    captures; "thread_local", its own captures but relaxed ones; "relaxed", none. A library that must make such a
    call while its caller may be capturing sets "relaxed" around it and puts the old mode back.

    See also: cudaThreadExchangeStreamCaptureMode.
    """
    check_mode(mode, "exchange_capture_mode")
    if HOST_THREADS:
        refuse_in_host_function("exchange_capture_mode")
    # Every backend's driver judges the thread's calls too, so it holds the same mode (a backend is loaded for it
    # now rather than later, when this thread's mode would not reach it).
    for name in available_backends():
        get_backend(name).thread_capture_mode(mode)
    previous: str = getattr(_thread, "mode", "global")
    _thread.mode = mode
    return previous


@contextlib.contextmanager
def thread_capture_mode(mode: str) -> Iterator[None]:
    """The calling thread's capture interaction mode is ``mode`` for the block (``exchange_capture_mode``), then
    what it was."""
    check_mode(mode, "thread_capture_mode")
    previous = exchange_capture_mode(mode)
    try:
        yield
    finally:
        exchange_capture_mode(previous)


def forbid_unsafe(api: str, rule: str = _UNSAFE) -> None:
    """Refuse a 'potentially unsafe' call (synchronous allocation, copy or wait) that a running capture forbids to
    this thread (its interaction mode: ``exchange_capture_mode``)."""
    if not active:
        return
    mode = getattr(_thread, "mode", "global")
    if mode == "relaxed":
        return
    me = threading.get_ident()
    offended = [c for c in list(active) if (c.thread == me and c.mode != "relaxed")
                or (mode == "global" and c.thread != me and c.mode == "global")]
    if offended:
        raise invalidate(offended, api, rule, _INSTEAD.get(api, ""))


_SECTION_TIMEOUT = 60.0  # seconds unsafe_section waits for other threads' global captures to end


@contextlib.contextmanager
def unsafe_section(api: str) -> Iterator[None]:
    """Run gpugraph's own potentially unsafe call for the user (``@captured`` instantiating its graph) once no
    other thread's ``global`` capture runs, and keep new captures from beginning until it is done: the call
    then neither fails nor invalidates another thread's capture, as it would if made at once. Captures of
    this thread still forbid it (``forbid_unsafe``).

    Raises:
        CaptureError: If other threads' global captures ran for all of ``_SECTION_TIMEOUT`` seconds.
    """
    me = threading.get_ident()

    def no_foreign_global_capture() -> bool:
        return not any(c.thread != me and c.mode == "global" for c in active)

    # The lock itself, not the Condition: Condition.__enter__ is Python code, and a KeyboardInterrupt at its
    # return would leave the lock held by this thread for good.
    with lock:
        if not no_foreign_global_capture() and not ended.wait_for(no_foreign_global_capture, _SECTION_TIMEOUT):
            running = next(c for c in active if c.thread != me and c.mode == "global")
            raise CaptureError(f"{api}: waited {_SECTION_TIMEOUT:.0f} s for another thread's 'global' capture to "
                               f"end (it forbids this call in every thread); capture in mode 'thread_local' "
                               f"to let other threads go on", api=api, stream=running.stream, mode=running.mode)
        yield


def forbid_device_sync(api: str, device: DeviceLike) -> None:
    """Refuse waiting for a whole device while one of its streams captures."""
    if not active:
        return
    offended = [c for c in list(active) if any(s.device is device for s in c.streams)]
    if offended:
        raise invalidate(offended, api, f"{device} has a capturing stream, which runs nothing, so the "
                                         f"device cannot be waited for")


def synchronize_device(device: DeviceLike, api: str) -> None:
    """Wait for all work on ``device`` (``api`` names the call, for its refusals): refused in a host function and
    while one of the device's streams captures."""
    refuse_in_host_function(api)
    forbid_device_sync(api, device)
    get_backend(device.backend).device_synchronize(device.index)


def check_usable(capture: RunningCapture, api: str) -> None:
    """Raise the first error again if ``capture`` was invalidated (later calls fail, naming the cause)."""
    error = capture.error
    if error is not None:
        raise CaptureError(f"{api}: the capture was invalidated earlier by {error.api}: {error}",
                           api=error.api, stream=error.stream, mode=error.mode)
