"""Host memory page-locked by gpugraph (cudaHostRegister / hipHostRegister), counted and shared by every use.

A graph copy, a captured copy or ``Device.register_host`` that needs host memory page-locked takes a ``HostPin``:
one use of the registration of its block of memory (the front end gives the whole buffer a NumPy array lies in,
``_memory.host_buffer``, so that every view of one buffer uses one registration). A registration covers exactly those
bytes, page-locked for every device of the backend at once; blocks next to each other may share a page (CUDA takes
registrations of byte ranges sharing a page, and copies from each are right: tools/probes/gpu_probe_host_register.py,
case R8). A registration is never changed while it is used: a copy's host memory must lie in one registration (CUDA
refuses a copy over two, by its host or its unified address, captured or not: R1, R7, R9), and unregistering memory a
copy node was made over breaks the node (its launch fails with CUDA_ERROR_LAUNCH_FAILED: R2). A block that lies
partly in a registration of another block is refused. A registration is released when its last use goes.

The backend supplies the driver's side (register, unregister, and whether memory is page-locked by someone else,
such as ``Device.pinned`` or another library, in which case it is used as it is) and the place where a release may
run (never inside a garbage collection or a capture, where the driver must not be called: see ``reap``).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .._interrupts import without_interrupts


class HostRegistrationError(ValueError):
    """The driver refused to page-lock host memory (``HostRegistry.pin`` says which memory and why)."""


class Registration:
    """A block of memory the backend page-locked: ``[start, end)``, its backend handle and its live uses.

    ``owner`` owns the memory: kept alive until it is unregistered, it keeps it mapped. (Memory freed and mapped again
    while registered would leave the registration on the old pages, and copies would miss the new ones.)"""

    __slots__ = ("start", "end", "handle", "uses", "read_only", "owner")

    def __init__(self, start: int, end: int, handle: Any, read_only: bool, owner: object) -> None:
        self.start, self.end, self.handle, self.read_only, self.owner = start, end, handle, read_only, owner
        self.uses = 0


class HostPin:
    """One use of page-locked host memory: it holds the registration of its block until ``release`` or until it is
    garbage-collected (a copy node's record holds its pins, so they last as long as any graph or executable
    graph holding the record)."""

    __slots__ = ("ptr", "nbytes", "_release", "__weakref__")

    def __init__(self, registry: HostRegistry, ptr: int, nbytes: int, registration: Registration) -> None:
        self.ptr, self.nbytes = ptr, nbytes
        self._release = weakref.finalize(self, registry._dropped, registration)
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
        register: ``register(start, nbytes, read_only)`` page-locks those bytes for every device of the backend and
            returns a handle; it raises ``HostRegistrationError`` saying why the driver refused.
        unregister: ``unregister(handle)`` makes them pageable again, once the devices' work that may use them is
            done.
        locked_elsewhere: ``locked_elsewhere(ptr, nbytes)``: whether that memory is page-locked by other means
            (``Device.pinned``, another library): such memory is used as it is.
        schedule: ``schedule(fn)`` calls ``fn`` where the driver may be called: at once, or later (outside a garbage
            collection, a driver callback or a capture).
    """

    def __init__(self, register: Callable[[int, int, bool], Any], unregister: Callable[[Any], None],
                 locked_elsewhere: Callable[[int, int], bool], schedule: Callable[[Callable[[], None]], None]) -> None:
        self._register, self._unregister = register, unregister
        self._locked_elsewhere, self._schedule = locked_elsewhere, schedule
        self._lock = threading.Lock()
        self._live: list[Registration] = []  # disjoint; uses 0: to be released at the next reap
        # The registrations of pins collected since the counts were last brought up to date: a collection may run
        # on any thread, inside an operation holding the lock, so it only notes them here.
        self._dead: deque[Registration] = deque()
        self._reap_asked = False

    def pin(self, ptr: int, nbytes: int, owner: object, *, block: tuple[int, int] | None = None,
            read_only: bool = False, writes: bool = False, what: str = "host memory") -> HostPin | None:
        """A use of ``[ptr, ptr + nbytes)`` page-locked: the registration of its block (``(start, nbytes)``, holding
        it; itself where not given), whose memory ``owner`` keeps, made where none holds it; None where the memory
        is page-locked by other means.

        ``read_only``: the devices only read it. A use that does not write (a copy's source) whose memory the driver
        refuses to register for writing (a read-only memory map) is registered read-only. ``writes``: it is written
        (a copy's destination), so it may not be registered read-only.

        Raises:
            ValueError: If the block lies partly in a registration of another block; with ``writes``, if it is
                registered read-only.
            HostRegistrationError: If the driver refuses to page-lock it.
        """
        if self._reap_asked:  # first: a released registration in the way (read-only, say) goes where it may
            self._schedule(self.reap)
        start, size = block if block is not None else (ptr, nbytes)
        end = start + size
        pin: list[HostPin | None] = []

        def make() -> None:  # (whole or not at all, Ctrl-C held back: a registration the registry lost stays)
            self._count_dead()
            covering = [r for r in self._live if r.start < end and start < r.end]
            if not covering and self._locked_elsewhere(ptr, nbytes):
                pin.append(None)
                return
            if covering and not (len(covering) == 1 and covering[0].start <= start and end <= covering[0].end):
                other = covering[0]
                raise ValueError(f"{what}: its memory ({size} bytes at {start:#x}) lies partly in memory page-locked "
                                 f"for another array ({other.end - other.start} bytes at {other.start:#x}), and a "
                                 f"copy's host memory must lie in one registration (CUDA refuses a copy over two); "
                                 f"copy through an array of its own, or make both arrays views of one buffer")
            if covering:
                registration = covering[0]
                if writes and registration.read_only:
                    raise ValueError(f"{what}: its memory is page-locked read-only (register_host(read_only=True); "
                                     f"a released registration stays so until its release can run, after a capture), "
                                     f"and this use writes it; release that registration, or use other memory")
            else:
                # (True: read-only; False: for writing; None: for writing where the driver allows it, else read-only)
                registration = self._register_block(start, end, True if read_only else False if writes else None,
                                                    owner)
                self._live.append(registration)
            registration.uses += 1
            pin.append(HostPin(self, ptr, nbytes, registration))  # (nothing can fail after the count)

        try:
            with self._lock:
                without_interrupts(make)
            return pin[0]
        finally:
            if self._reap_asked:
                self._schedule(self.reap)

    def _register_block(self, start: int, end: int, read_only: bool | None, owner: object) -> Registration:
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
            return sorted((r.start, r.end - r.start, r.uses) for r in self._live)

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
                        self._unregister(r.handle)
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
            self._dead.popleft().uses -= 1

    def _dropped(self, registration: Registration) -> None:
        """A pin was released or collected (any thread; maybe inside a collection during a call holding the lock)."""
        self._dead.append(registration)
        self._reap_asked = True
        self._schedule(self.reap)

