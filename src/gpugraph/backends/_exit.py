"""What interpreter exit does with queued work, on every backend: it lets the work finish, waiting at most
``$GPUGRAPH_EXIT_TIMEOUT`` seconds, and says on stderr what did not finish and which errors no synchronize
reported (docs/design.md, Reliability)."""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable

EXIT_TIMEOUT = 10.0  # seconds the interpreter's exit waits for queued work; $GPUGRAPH_EXIT_TIMEOUT changes it


def exit_timeout() -> float:
    """Seconds the exit waits for queued work: $GPUGRAPH_EXIT_TIMEOUT, else ``EXIT_TIMEOUT`` (said on stderr
    when the variable is not a non-negative number)."""
    value = os.environ.get("GPUGRAPH_EXIT_TIMEOUT")
    if value is None:
        return EXIT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        say(f"GPUGRAPH_EXIT_TIMEOUT must be a number of seconds, got {value!r}; waiting at most "
            f"{EXIT_TIMEOUT:g} s for queued work")
        return EXIT_TIMEOUT
    return seconds


def say(message: str) -> None:
    """Write ``message`` on stderr, as gpugraph's at interpreter exit (nothing can raise there)."""
    sys.stderr.write(f"gpugraph: {message}\n")


def unfinished(what: str, timeout: float) -> None:
    """Say that the work queued on ``what`` did not finish within the exit's wait."""
    say(f"at interpreter exit, the work queued on {what} did not finish within {timeout:g} s "
        f"(GPUGRAPH_EXIT_TIMEOUT) and was abandoned; synchronize before exiting")


def never_reported(where: str, error: BaseException) -> None:
    """Say that work on ``where`` had raised ``error`` and no synchronize reported it."""
    say(f"at interpreter exit, work on {where} had raised an error that no synchronize reported (never "
        f"reported): {type(error).__name__}: {error}")


class ExitWaiter:
    """Runs one blocking call at interpreter exit and waits for it at most a given time. Its thread starts
    with the backend and sleeps until then: Python 3.12 refuses to start a thread once exit has begun."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._done = threading.Event()
        self._pid = os.getpid()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        job = self._jobs.get()
        try:
            job()
        finally:
            self._done.set()

    @property
    def forked(self) -> bool:
        """Whether this is a child process forked after the waiter started (its thread is not here)."""
        return os.getpid() != self._pid

    def run(self, job: Callable[[], None], timeout: float) -> bool:
        """Run ``job`` on the waiter's thread; True if it ended within ``timeout`` seconds."""
        self._jobs.put(job)
        return self._done.wait(timeout)
