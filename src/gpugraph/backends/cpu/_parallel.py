"""Independent branches of a CPU graph's run on a thread pool: only chains that become ready together are handed
to the pool, in time linear in chains and edges; ``lending`` lets a step that blocks for other branches give its
place to one more thread. ``FuzzedRun`` runs them in an order and with an overlap drawn at random instead (schedule
fuzzing), to show the edges a graph lacks.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import random
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import suppress
from itertools import count

from ._plan import Chain, Plan, Step
from ._streams import lending as branch_lending

# At most this many threads help one run of a graph (the pool has as many): independent branches beyond
# that wait for a thread, as CUDA's work waits for free hardware.
POOL_THREADS = max(8, 2 * (os.cpu_count() or 1))

# Seconds a fuzzed run lets a group of chains run before it draws the next group anyway. Independent branches
# run concurrently on the CPU backend, and a graph may count on it (two host nodes meeting at a barrier), so
# a fuzzed run must not wait for a group whose chains wait for chains not drawn yet. Long enough that chains
# that do not wait (a test's) finish first and the seed alone shapes the schedule, short enough to cost little
# where they do.
PATIENCE = 0.1


_running = threading.local()  # .run: the ParallelRun this thread last ran chains of (drive or _help)


@contextlib.contextmanager
def _running_as(run: ParallelRun | FuzzedRun) -> Iterator[ParallelRun | FuzzedRun | None]:
    """Make ``run`` this thread's running run for the block (a child graph's run inside its parent's: the parent's is
    restored after), giving the one it replaces."""
    previous, _running.run = getattr(_running, "run", None), run
    try:
        yield previous
    finally:
        _running.run = previous


def lending() -> contextlib.AbstractContextManager[None]:
    """For a step that blocks until other steps run (a collective's part waiting for the other ranks'): lets
    the graph run that this thread serves, and its pool, have one thread more meanwhile, so that a graph with
    more such branches than the pool has threads still completes. Off a graph run it does nothing."""
    run = getattr(_running, "run", None)
    return contextlib.nullcontext() if run is None else run.lending()


class ParallelRun:
    """One run of a graph with several chains, in time and memory linear in chains and edges.

    The thread that calls ``drive`` runs chains; a finished chain makes ready each successor whose
    predecessors have all finished, and pool threads are asked to help only while ready chains outnumber
    the threads about to take them, at most ``POOL_THREADS`` at a time; a helper runs ready chains until
    none is left. The per-chain path takes no lock: it uses operations the interpreter makes atomic
    (``deque.append``/``popleft``, ``next`` of an ``itertools.count``, ``list.append``), so that many
    short branches do not queue their threads on one lock.
    """

    def __init__(self, pool: Executor, plan: Plan) -> None:
        self.steps = plan.steps
        self.pool = pool
        self.ready = deque(plan.roots)
        # A chain with several predecessors is ready when the last of them counts itself in.
        self.joins = [count() if len(c.preds) > 1 else None for c in plan.chains]
        self.finished = count()
        self.last = len(plan.chains) - 1
        self.all_done = not plan.chains
        self.errors: list[BaseException] = []  # each chain's first, in the order they were raised
        self.lock = threading.Lock()  # for the helper counts below only
        self.helpers = 0  # helper tasks asked for that have not returned
        self.unstarted = 0  # of those, the ones not running yet: each will take a ready chain
        self.waiting = False  # whether the driving thread waits (or is about to) for a ready chain
        self.lent = 0  # this run's threads blocked in ``lending``: as many more helpers may be asked for
        self.wake = threading.Lock()  # released to wake the driving thread
        self.wake.acquire()

    def drive(self) -> None:
        with _running_as(self):
            self._drive()

    def _drive(self) -> None:
        chain = self._take()
        self._ask_helpers()
        while chain is not None:
            chain = self._run_chain(chain)
            while chain is None and not self.all_done:
                # Nothing ready: wait. A thread making a chain ready after ``waiting`` is set sees it
                # and wakes this one; a chain made ready before is found by the second look.
                self.waiting = True
                chain = self._take()
                if chain is None and not self.all_done:
                    self.wake.acquire()
                self.waiting = False
        if self.errors:
            raise self.errors[0]

    def _help(self) -> None:
        with _running_as(self):
            self._help_run()

    def _help_run(self) -> None:
        with self.lock:
            self.unstarted -= 1
        while True:
            chain = self._take()
            while chain is not None:
                chain = self._run_chain(chain)
            with self.lock:  # return, unless a chain became ready meanwhile (it may have counted on us)
                if not self.ready:
                    self.helpers -= 1
                    return

    def _take(self) -> Chain | None:
        try:
            return self.ready.popleft()
        except IndexError:
            return None

    def _run_chain(self, chain: Chain) -> Chain | None:
        """Run one chain, make its successors ready, and take the next ready chain (None if none)."""
        error = run_steps(self.steps[chain.index])
        if error is not None:
            self.errors.append(error)
        ready, joins = self.ready, self.joins
        for successor in chain.successors:
            join = joins[successor.index]
            if join is None or next(join) == len(successor.preds) - 1:
                ready.append(successor)
        if next(self.finished) == self.last:
            self.all_done = True
            self._wake()
        following = self._take()
        if ready:  # more than this thread takes: wake the driving thread, or ask for help
            if self.waiting:
                self._wake()
            if self.helpers < POOL_THREADS + self.lent:
                self._ask_helpers()
        return following

    @contextlib.contextmanager
    def lending(self) -> Iterator[None]:
        """While this run's thread blocks for work only its other branches can do, one more helper may run."""
        with self.lock:
            self.lent += 1
        try:
            with branch_lending():
                self._ask_helpers()
                yield
        finally:
            with self.lock:
                self.lent -= 1

    def _wake(self) -> None:
        with suppress(RuntimeError):  # released already, and not taken since
            self.wake.release()

    def _ask_helpers(self) -> None:
        """Ask for one helper per ready chain no thread is about to take (helpers not started yet, the
        driving thread if it waits), within the pool's size."""
        with self.lock:
            extra = min(len(self.ready) - self.unstarted - self.waiting, POOL_THREADS + self.lent - self.helpers)
            if extra <= 0:
                return
            self.helpers += extra
            self.unstarted += extra
        for asked in range(extra):
            try:
                self.pool.submit(self._help)
            except RuntimeError:  # the pool is shut down (interpreter exit): the running threads do the rest
                with self.lock:
                    self.helpers -= extra - asked
                    self.unstarted -= extra - asked
                return


class FuzzedRun:
    """One run of a graph with several chains in an order and with an overlap drawn from ``schedule`` (schedule
    fuzzing: ``CpuBackend.schedule_seed``), so that two branches that need an edge between them show it.

    The ready chains start in groups drawn at random: one chain alone, or several started together on the pool.
    The next group is drawn when every chain started has finished, or, while some have not, once ``PATIENCE``
    has passed since the last draw (and again each time it passes), so that a graph whose branches wait for
    each other completes as it does unfuzzed. A step that blocks for work only other branches can do
    (``lending``: a collective's part) lets the next group start at once, in this run and in the runs around it
    (a child graph's run is a step of its parent's). Every draw is decided by ``schedule``, from the ready
    chains in index order: which chains, and grouped how. Only the moment of a draw may depend on time, and
    with it which chains are ready then: a run whose groups each finish within ``PATIENCE`` and do not lend
    has the schedule one state of ``schedule`` gives. A chain still starts only once its predecessors have
    finished.

    The thread that draws a group runs one of its chains and asks the pool for one helper per other chain; a
    thread that finishes a chain takes the group's next chain no helper has taken yet, so a run completes even
    when the pool has no thread to spare (a child graph's run on a pool thread).
    """

    def __init__(self, pool: Executor, plan: Plan, schedule: random.Random) -> None:
        self.steps = plan.steps
        self.pool = pool
        self.schedule = schedule
        self.waiting = [len(c.preds) for c in plan.chains]  # per chain: its predecessors not finished yet
        self.ready: list[Chain] = list(plan.roots)
        self.unsorted = False  # whether ``ready`` may be out of the order a draw needs (chains finished together)
        self.group: list[Chain] = []  # the chains of the groups drawn that no thread has taken yet, last first
        self.taken = 0  # chains taken and not finished
        # Those less the ones blocked in ``lending`` (below 0 while several threads of one chain, a child graph's
        # run, lend at once).
        self.running = 0
        self.drawn_at = 0.0  # ``time.monotonic()`` at the last draw
        self.left = len(plan.chains)
        self.errors: list[BaseException] = []  # each chain's first, in the order they were raised
        self.lock = threading.Lock()  # for all of the above
        self.done = threading.Event()
        if not self.left:
            self.done.set()
        self.outer: ParallelRun | FuzzedRun | None = None  # the run whose step this run is (a child graph's)

    def drive(self) -> None:
        with _running_as(self) as self.outer:
            with self.lock:
                drawn = self._draw()
                chain = self._take()
            if chain is not None:
                _patience.watch(self, self.drawn_at + PATIENCE)
            self._serve(chain, drawn - 1)
            self.done.wait()
        if self.errors:
            raise self.errors[0]

    def _help(self) -> None:
        with _running_as(self):
            with self.lock:
                chain = self._take()
            self._serve(chain, 0)

    def _serve(self, chain: Chain | None, helpers: int) -> None:
        """Ask for ``helpers``, then run ``chain`` and the chains this thread takes after it, until none is left."""
        while chain is not None:
            self._ask(helpers)
            error = run_steps(self.steps[chain.index])
            with self.lock:
                if error is not None:
                    self.errors.append(error)
                helpers = self._finish(chain) - 1
                chain = self._take()

    def _take(self) -> Chain | None:
        """The group's next chain no thread has taken (None if none), counted as running. Under the lock."""
        if not self.group:
            return None
        self.running += 1
        self.taken += 1
        return self.group.pop()

    def _finish(self, chain: Chain) -> int:
        """Count ``chain`` finished and make its successors ready; draw the next group if it was the last of its
        group to run. The size of the group drawn (0: none). Under the lock."""
        self.running -= 1
        self.taken -= 1
        self.left -= 1
        waiting, ready = self.waiting, self.ready
        for successor in chain.successors:
            waiting[successor.index] -= 1
            if not waiting[successor.index]:
                ready.append(successor)
        if not self.left:
            self.done.set()
            return 0
        return 0 if self.group or self.running > 0 else self._draw()

    def _draw(self) -> int:
        """Draw the next group from the ready chains: one chain half the time, else from two to all of them; its
        chains are taken after any drawn before that no thread has taken yet. Its size (0: none is ready). Under
        the lock."""
        ready, schedule = self.ready, self.schedule
        if not ready:
            return 0
        if self.unsorted:  # (chains that finished together made their successors ready in the order they finished)
            ready.sort(key=_index)
        if len(ready) == 1 or schedule.random() < 0.5:
            picked = schedule.randrange(len(ready))
            group = [ready[picked]]
            ready[picked] = ready[-1]  # (an order that depends on the draws alone)
            ready.pop()
        else:
            chosen = schedule.sample(range(len(ready)), schedule.randint(2, len(ready)))
            group = [ready[i] for i in chosen]
            taken = set(chosen)
            self.ready = [c for i, c in enumerate(ready) if i not in taken]
        group.reverse()  # (taken from the end: in the order drawn)
        self.group[:0] = group
        # (chains that may finish before the next draw, in an order timing decides: lenders are among ``taken``)
        self.unsorted = len(self.group) + self.taken > 1
        self.drawn_at = time.monotonic()
        return len(group)

    def _patience_over(self, now: float) -> float | None:
        """``_patience``'s call at ``now``: draw the next group and start it if ``PATIENCE`` has passed since the
        last draw and a chain is ready. When to call again (None: the run is done)."""
        with self.lock:
            if not self.left:
                return None
            if now < self.drawn_at + PATIENCE:
                return self.drawn_at + PATIENCE
            drawn = self._draw()
        self._ask(drawn)
        return now + PATIENCE

    @contextlib.contextmanager
    def lending(self) -> Iterator[None]:
        """While this run's thread blocks for work only other branches can do, the next group may start, here
        and in the runs around this one (the branches it waits for may be theirs)."""
        with self.lock:
            self.running -= 1
            drawn = 0 if self.group or self.running > 0 else self._draw()
        try:
            with branch_lending() if self.outer is None else self.outer.lending():
                self._ask(drawn)
                yield
        finally:
            with self.lock:
                self.running += 1

    def _ask(self, helpers: int) -> None:
        for _ in range(helpers):
            try:
                self.pool.submit(self._help)
            except RuntimeError:  # the pool is shut down (interpreter exit): the running threads take the rest
                return


def _index(chain: Chain) -> int:
    return chain.index


class _Patience:
    """One daemon thread, started with the first fuzzed run, that calls each fuzzed run's ``_patience_over`` when
    it asks, until the run is done: the one place where a fuzzed schedule looks at the clock."""

    def __init__(self) -> None:
        self.due: list[tuple[float, int, FuzzedRun]] = []  # a heap: when, order of asking, the run
        self.order = count()
        self.changed = threading.Condition()
        self.started = False

    def watch(self, run: FuzzedRun, at: float) -> None:
        """Call ``run._patience_over`` at ``at`` (``time.monotonic()``)."""
        with self.changed:
            entry = (at, next(self.order), run)
            heapq.heappush(self.due, entry)
            if not self.started:
                self.started = True
                threading.Thread(target=self._watch, daemon=True, name="gpugraph-cpu-schedule-patience").start()
            elif self.due[0] is entry:  # (the thread waits for a later one)
                self.changed.notify()

    def _watch(self) -> None:
        while True:
            with self.changed:
                while True:
                    now = time.monotonic()
                    if self.due and self.due[0][0] <= now:
                        break
                    self.changed.wait(self.due[0][0] - now if self.due else None)
                run = heapq.heappop(self.due)[2]
            at = run._patience_over(now)  # (outside the lock: it takes the run's lock and asks the pool for help)
            if at is not None:
                self.watch(run, at)


_patience = _Patience()


def run_steps(steps: list[Step]) -> BaseException | None:
    """Run one chain's steps in order, each whatever the others raised; the first error, or None (``drive`` raises
    the errors of a run once it is over)."""
    error = None
    for fn, args in steps:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - kept for drive(), which raises it
            error = error or exc
    return error
