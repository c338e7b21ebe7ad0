"""Host memory page-locked by gpugraph (cudaHostRegister / hipHostRegister), counted and shared by every use.

A graph copy, a captured copy or ``Device.register_host`` that needs host memory page-locked takes a ``HostPin``:
one use of the registrations covering its pages. A registration covers a run of whole pages, page-locked for every
device of the backend at once. A later use over registered pages uses those registrations, and registers only the
pages between and around them that none covers yet: arrays that share pages (small NumPy arrays often share one),
several graphs and several devices share registrations, and a registration is never changed while a copy node may
have been made over it (unregistering memory under a copy node breaks the node: its launch fails with
CUDA_ERROR_LAUNCH_FAILED, tools/probes/gpu_probe_host_register.py, case R2). A copy whose host memory lies in several
registrations names it by its unified address, which the driver takes (case R7; by its host address it refuses
such a copy, case R1). A registration is released when its last use goes.

The backend supplies the driver's side (register, unregister, and whether memory is page-locked by someone else,
such as ``Device.pinned`` or another library, in which case it is used as it is) and the place where a release may
run (never inside a garbage collection or a capture, where the driver must not be called: see ``reap``).
"""

from __future__ import annotations

import mmap
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .._interrupts import without_interrupts

PAGE = mmap.PAGESIZE


class HostRegistrationError(ValueError):
    """The driver refused to page-lock host memory (``HostRegistry.pin`` says which memory and why)."""


class Registration:
    """One run of pages the backend page-locked: ``[start, end)``, its backend handle and its live uses.

    ``owner`` owns the memory of the use that made it, which touches each of its pages: kept alive until it is
    unregistered, it keeps them mapped. (Memory freed and mapped again while registered would leave the registration
    on the old pages, and copies would miss the new ones.)"""

    __slots__ = ("start", "end", "handle", "uses", "read_only", "owner")

    def __init__(self, start: int, end: int, handle: Any, read_only: bool, owner: object) -> None:
        self.start, self.end, self.handle, self.read_only, self.owner = start, end, handle, read_only, owner
        self.uses = 0


class HostPin:
    """One use of page-locked host memory: it holds the registrations covering its range until ``release`` or until
    it is garbage-collected (a copy node's record holds its pins, so they last as long as any graph or executable
    graph holding the record)."""

    __slots__ = ("ptr", "nbytes", "_release", "__weakref__")

    def __init__(self, registry: HostRegistry, ptr: int, nbytes: int, registrations: tuple[Registration, ...]) -> None:
        self.ptr, self.nbytes = ptr, nbytes
        self._release = weakref.finalize(self, registry._dropped, registrations)
        self._release.atexit = False  # (the driver may be gone at interpreter exit)

    @property
    def released(self) -> bool:
        """Whether this use has ended."""
        return not self._release.alive

    def release(self) -> None:
        """End this use now (once; later calls do nothing)."""
        self._release()

    def __repr__(self) -> str:
        return f"HostPin({self.ptr:#x}, {self.nbytes} bytes{', released' if self.released else ''})"


class HostRegistry:
    """The registrations one backend made, and their uses.

    Args:
        register: ``register(start, nbytes, read_only)`` page-locks whole pages for every device of the backend and
            returns a handle; it raises ``HostRegistrationError`` saying why the driver refused.
        unregister: ``unregister(handle, used)`` makes them pageable again; ``used``: work the devices were given may
            use them (it is waited for first), else nothing was made over them yet.
        locked_elsewhere: ``locked_elsewhere(ptr, nbytes)``: whether that memory is page-locked by other means
            (``Device.pinned``, another library): such memory is used as it is.
        schedule: ``schedule(fn)`` calls ``fn`` where the driver may be called: at once, or later (outside a garbage
            collection, a driver callback or a capture).
    """

    def __init__(self, register: Callable[[int, int, bool], Any], unregister: Callable[[Any, bool], None],
                 locked_elsewhere: Callable[[int, int], bool], schedule: Callable[[Callable[[], None]], None]) -> None:
        self._register, self._unregister = register, unregister
        self._locked_elsewhere, self._schedule = locked_elsewhere, schedule
        self._lock = threading.Lock()
        self._live: list[Registration] = []  # sorted by start, disjoint; uses 0: to be released at the next reap
        # The registrations of pins collected since the counts were last brought up to date: a collection may run
        # on any thread, inside an operation holding the lock, so it only notes them here.
        self._dead: deque[tuple[Registration, ...]] = deque()
        self._reap_asked = False

    def pin(self, ptr: int, nbytes: int, owner: object, *, read_only: bool = False, writes: bool = False,
            what: str = "host memory") -> HostPin | None:
        """A use of ``[ptr, ptr + nbytes)``, whose memory ``owner`` keeps (a NumPy array), page-locked: the
        registrations of its pages, its pages that none covers registered; None where the memory is page-locked by
        other means.

        ``read_only``: the devices only read it. A use that does not write (a copy's source) whose pages the driver
        refuses to register for writing (a read-only memory map) is registered read-only. ``writes``: it is written
        (a copy's destination), so no part of it may be registered read-only.

        Raises:
            ValueError: With ``writes``, if part of it is registered read-only.
            HostRegistrationError: If the driver refuses to page-lock it (the registrations stay as they were).
        """
        if self._reap_asked:  # first: a released registration in the way (read-only, say) goes where it may
            self._schedule(self.reap)
        start, end = _pages(ptr, nbytes)
        pin: list[HostPin | None] = []

        def make() -> None:  # (whole or not at all, Ctrl-C held back: a registration the registry lost stays)
            self._count_dead()
            covering = [r for r in self._live if r.start < end and start < r.end]
            if writes and any(r.read_only for r in covering):
                raise ValueError(f"{what}: its memory is page-locked read-only (register_host(read_only=True); a "
                                 f"released registration stays so until its release can run, after a capture), and "
                                 f"this use writes it; release that registration, or use other memory")
            if not covering and self._locked_elsewhere(ptr, nbytes):
                pin.append(None)
                return
            # (True: read-only; False: for writing; None: for writing where the driver allows it, else read-only)
            made = self._register_gaps(start, end, covering, True if read_only else False if writes else None, owner)
            if made:
                self._live = sorted([*self._live, *made], key=lambda r: r.start)
            registrations = tuple(sorted([*covering, *made], key=lambda r: r.start))
            for registration in registrations:
                registration.uses += 1
            pin.append(HostPin(self, ptr, nbytes, registrations))  # (nothing can fail after the counts)

        try:
            with self._lock:
                without_interrupts(make)
            return pin[0]
        finally:
            if self._reap_asked:
                self._schedule(self.reap)

    def _register_gaps(self, start: int, end: int, covering: list[Registration], read_only: bool | None,
                       owner: object) -> list[Registration]:
        """(With the lock.) Registrations of the runs of ``[start, end)`` that ``covering`` (sorted) leaves out: all
        made, or none (those made are unregistered again where the driver refuses one)."""
        gaps, at = [], start
        for r in covering:
            if at < r.start:
                gaps.append((at, r.start))
            at = max(at, r.end)
        if at < end:
            gaps.append((at, end))
        made: list[Registration] = []
        try:
            for gap_start, gap_end in gaps:
                made.append(self._register_run(gap_start, gap_end, read_only, owner))
        except BaseException as refusal:
            failures = []
            for r in made:  # (each tried: one that fails leaves the others to go all the same)
                try:
                    self._unregister(r.handle, False)
                except Exception as exc:  # noqa: BLE001 - raised below, caused by the refusal
                    failures.append(exc)
            if failures:
                raise failures[0] from refusal
            raise
        return made

    def _register_run(self, start: int, end: int, read_only: bool | None, owner: object) -> Registration:
        try:
            return Registration(start, end, self._register(start, end - start, bool(read_only)), bool(read_only), owner)
        except HostRegistrationError:
            if read_only is not None:
                raise
            return Registration(start, end, self._register(start, end - start, True), True, owner)

    def registrations(self) -> list[tuple[int, int, int]]:
        """(start, bytes, uses) of each registration, by address, once what was released is unregistered (uses 0: its
        release waits, as in a capture, for a place where the driver may be called)."""
        with self._lock:
            self._count_dead()
        if self._reap_asked:
            self._schedule(self.reap)
        with self._lock:
            return [(r.start, r.end - r.start, r.uses) for r in self._live]

    def reap(self) -> None:
        """Unregister the registrations no pin uses. Called through ``schedule``, where the driver may be called;
        while another call holds the registry, that call reaps when done (the request is noted before the lock is
        tried, and looked at again after the lock is let go)."""
        self._reap_asked = True
        failure = None
        while self._reap_asked:
            if not self._lock.acquire(blocking=False):
                return
            try:
                self._reap_asked = False
                self._count_dead()
                for r in [r for r in self._live if not r.uses]:
                    self._live.remove(r)
                    try:
                        self._unregister(r.handle, True)
                    except Exception as exc:  # noqa: BLE001 - the others are released all the same; the first is raised
                        failure = failure or exc
                    r.owner = None
            finally:
                self._lock.release()
        if failure is not None:
            raise failure

    def _count_dead(self) -> None:
        """(With the lock.) Take the uses of collected pins off their registrations' counts."""
        while self._dead:
            for registration in self._dead.popleft():
                registration.uses -= 1

    def _dropped(self, registrations: tuple[Registration, ...]) -> None:
        """A pin was released or collected (any thread; maybe inside a collection during a call holding the lock)."""
        self._dead.append(registrations)
        self._reap_asked = True
        self._schedule(self.reap)


def _pages(ptr: int, nbytes: int) -> tuple[int, int]:
    """The whole pages holding ``[ptr, ptr + nbytes)`` (one page at least), as ``[start, end)``."""
    return ptr // PAGE * PAGE, -(-(ptr + max(nbytes, 1)) // PAGE) * PAGE
