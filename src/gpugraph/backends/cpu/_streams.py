"""CPU streams and events: each stream is a FIFO of tasks run in order by its own worker thread."""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

from ..._host_threads import HOST_THREADS
from ._timeline import lanes


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

    __slots__ = ("timing", "latest", "capture_nodes")

    def __init__(self, timing: bool) -> None:
        self.timing = timing
        self.latest: Completion | None = None
        # The recording stream's frontier at its last record in a capture (which capture, and whether that
        # record is the latest, is the front end's record: Event._capture).
        self.capture_nodes: list[Any] = []


def _work(tasks: queue.SimpleQueue[Any], stream: CpuStream) -> None:
    """The stream's worker: runs its tasks, marked as a host-function thread while each runs, and notes the
    number of each it has run. After the stream is closed it runs what is left (including markers queued
    meanwhile), then exits."""
    get, ident, mark, unmark = tasks.get, threading.get_ident(), HOST_THREADS.add, HOST_THREADS.discard
    lanes.name = f"stream {stream.number}"
    closed = False
    while True:
        if closed:
            with stream._lock:  # so that a task put from now on runs at once (see put)
                if tasks.empty():
                    stream.exited = True
                    return
        item = get()
        if item is None:
            closed = True
            continue
        fn, args, number = item
        mark(ident)
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - kept and raised at the next synchronize
            if stream.error is None:
                stream.error = exc
        finally:
            unmark(ident)
        # Hold nothing of the task while waiting for the next: its arguments (a graph's run, a copy's arrays and the
        # pages they hold locked) go as soon as it has run.
        item = fn = args = None
        stream.completed = number


def _nothing() -> None:
    """A task that does nothing."""


_stream_numbers = itertools.count(1)


class CpuStream:
    """A stream: tasks ``(fn, args)`` run in submission order on the stream's worker thread."""

    def __init__(self, index: int, non_blocking: bool, priority: int) -> None:
        self.index = index
        self.number = next(_stream_numbers)  # (names its worker in timelines: "stream 3")
        self.non_blocking = non_blocking
        self.priority = priority
        self.error: BaseException | None = None
        # Tasks are numbered in queue order; the stream is idle when the last run is the last numbered.
        self.submitted = 0  # the number of the last task queued
        self.completed = 0  # the number of the last task run
        # For the legacy default stream and blocking streams: orders a submission behind the other side's
        # earlier work (CUDA's implicit synchronization), else None.
        self.implicit_order: Callable[[CpuStream], None] | None = None
        self.closed = False  # destroyed: its worker exits once it has run the work queued
        self.exited = False  # closed, and its worker has run everything and exited
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=_work, args=(self._tasks, self), daemon=True,
                                        name="gpugraph-cpu-stream")
        self._thread.start()

    def submit(self, fn: Callable[..., Any], args: tuple) -> None:
        if self.implicit_order is not None:
            self.implicit_order(self)
        self.put(fn, args)

    def put(self, fn: Callable[..., Any], args: tuple) -> int:
        """Enqueue without the implicit ordering (markers that implement it); the task's number. On a stream
        whose worker has exited (closed, all its work done) it runs at once: only markers reach such a
        stream."""
        with self._lock:
            if not self.exited:
                number = self.submitted = self.submitted + 1
                try:
                    self._tasks.put((fn, args, number))
                except BaseException:
                    # Raised inside the put (the task is not queued) or once it returned (a signal's
                    # KeyboardInterrupt: it is), which cannot be told apart: a no-op numbered after it
                    # makes the count whole either way once it has run.
                    number = self.submitted = number + 1
                    self._tasks.put((_nothing, (), number))
                    raise
                return number
        fn(*args)
        return self.completed

    def query(self) -> bool:
        return self.completed >= self.submitted

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until the work enqueued so far has run (at most ``timeout`` seconds); whether it has."""
        if self.query():
            return True
        done = threading.Event()
        number = self.put(done.set, ())
        if not done.wait(timeout):
            return False
        while self.completed < number:  # the worker notes the marker run just after it wakes this thread,
            time.sleep(0)  # so that the stream is done once this returns (as after cudaStreamSynchronize)
        return True

    def synchronize(self) -> None:
        self.wait_idle()
        self.raise_error()

    def take_error(self) -> BaseException | None:
        """The error kept since the last synchronize (None if none), now no longer kept."""
        with self._lock:  # two threads synchronizing at once report it once
            error, self.error = self.error, None
        return error

    def raise_error(self) -> None:
        error = self.take_error()
        if error is not None:
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
        """Destroy the stream: its worker runs the work already queued, then exits (as CUDA finishes a
        destroyed stream's work)."""
        self.closed = True
        self._tasks.put(None)


_pool_of_thread = threading.local()  # .pool: the BranchPool whose thread this is


def lending() -> contextlib.AbstractContextManager[None]:
    """``BranchPool.lending`` of the pool whose thread calls it; nothing to do on any other thread."""
    pool = getattr(_pool_of_thread, "pool", None)
    return contextlib.nullcontext() if pool is None else pool.lending()


class BranchPool(Executor):
    """Daemon threads that run graph branches, marked as host-function threads while they run one.

    Daemon threads, unlike ``ThreadPoolExecutor``'s, are not joined at interpreter exit, so a branch
    blocked forever cannot hang the exit (the backend's exit handler waits for streams, with a bound)."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._threads = 0
        self._idle = threading.Semaphore(0)  # released by a thread each time it waits for a task
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self._tasks.put((future, fn, args, kwargs))
        if not self._idle.acquire(timeout=0):  # no thread is waiting: start one, up to ``workers``
            with self._lock:
                if self._threads < self._workers:
                    self._threads += 1
                    threading.Thread(target=self._work, args=(self._threads,), daemon=True,
                                     name=f"{self._name}_{self._threads}").start()
        return future

    @contextlib.contextmanager
    def lending(self) -> Iterator[None]:
        """While a branch blocks for work only other branches can do (a collective's part waiting for the other
        ranks' parts), the pool may have one thread more, so that the branches it waits for still get one."""
        with self._lock:
            self._workers += 1
            if not self._tasks.empty() and self._threads < self._workers:  # queued, held back by the cap
                self._threads += 1
                threading.Thread(target=self._work, args=(self._threads,), daemon=True,
                                 name=f"{self._name}_{self._threads}").start()
        try:
            yield
        finally:
            with self._lock:
                self._workers -= 1

    def _work(self, number: int) -> None:
        get, ident, mark, unmark = self._tasks.get, threading.get_ident(), HOST_THREADS.add, HOST_THREADS.discard
        _pool_of_thread.pool = self
        lanes.name = f"worker {number}"
        while True:
            future, fn, args, kwargs = get()
            if future.set_running_or_notify_cancel():
                mark(ident)
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - kept in the future, as ThreadPoolExecutor does
                    fn = args = kwargs = None  # (before the waiter wakes: hold nothing of the task, see _work above)
                    future.set_exception(exc)
                else:
                    fn = args = kwargs = None
                    future.set_result(result)
                    result = None
                finally:
                    unmark(ident)
            future = fn = args = kwargs = None
            self._idle.release()
