"""CPU streams and events: each stream is a FIFO of tasks run in order by its own worker thread."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..._errors import GpuGraphError


class Completion:
    """One record of an event: set when the stream reaches it, stamped with the time."""

    __slots__ = ("flag", "time")

    def __init__(self) -> None:
        self.flag = threading.Event()
        self.time = 0.0

    def fire(self) -> None:
        self.time = time.perf_counter()
        self.flag.set()


class CpuEvent:
    """An event: ``latest`` is its most recent record (None if never recorded)."""

    __slots__ = ("timing", "latest", "capture", "capture_nodes")

    def __init__(self, timing: bool) -> None:
        self.timing = timing
        self.latest: Completion | None = None
        self.capture: Any = None  # the capture the event was last recorded in
        self.capture_nodes: list[Any] = []  # the recording stream's frontier at that record

    def record_at_launch(self, pending: deque[Completion]) -> None:
        """A graph launch records the event now; its node fires the record when it runs."""
        completion = Completion()
        self.latest = completion
        self.capture = None
        pending.append(completion)

    def wait_latest(self) -> None:
        """Wait for the record that was last made (a graph's event-wait node)."""
        latest = self.latest
        if latest is not None:
            latest.flag.wait()


def _work(tasks: queue.SimpleQueue[Any], stream: CpuStream) -> None:
    get = tasks.get
    while True:
        item = get()
        if item is None:
            return
        fn, args = item
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - kept and raised at the next synchronize
            if stream.error is None:
                stream.error = exc
        stream.completed += 1


class CpuStream:
    """A stream: tasks ``(fn, args)`` run in submission order on the stream's worker thread."""

    def __init__(self, index: int, non_blocking: bool, priority: int) -> None:
        self.index = index
        self.non_blocking = non_blocking
        self.priority = priority
        self.error: BaseException | None = None
        self.submitted = 0
        self.completed = 0
        self.capture: Any = None  # the capture this stream records into, if any
        # For the legacy default stream and blocking streams: orders a submission behind the other side's
        # earlier work (CUDA's implicit synchronization), else None.
        self.implicit_order: Callable[[CpuStream], None] | None = None
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=_work, args=(self._tasks, self), daemon=True,
                                        name="gpugraph-cpu-stream")
        self._thread.start()

    def submit(self, fn: Callable[..., Any], args: tuple) -> None:
        if self.implicit_order is not None:
            self.implicit_order(self)
        self.put(fn, args)

    def put(self, fn: Callable[..., Any], args: tuple) -> None:
        """Enqueue without the implicit ordering (markers that implement it)."""
        with self._lock:
            self.submitted += 1
            self._tasks.put((fn, args))

    def query(self) -> bool:
        return self.completed >= self.submitted

    def synchronize(self) -> None:
        if threading.current_thread() is self._thread:
            raise GpuGraphError("synchronize was called from a host function running on the same stream; "
                                "host functions must not wait for their own stream (it would deadlock)")
        if not self.query():
            done = threading.Event()
            self.submit(done.set, ())
            done.wait()
        self.raise_error()

    def raise_error(self) -> None:
        error = self.error
        if error is not None:
            self.error = None
            raise error

    def record(self, event: CpuEvent) -> None:
        completion = Completion()
        event.latest = completion
        self.submit(completion.fire, ())

    def wait(self, event: CpuEvent) -> None:
        latest = event.latest
        if latest is not None and not latest.flag.is_set():
            self.submit(latest.flag.wait, ())

    def close(self) -> None:
        self._tasks.put(None)
