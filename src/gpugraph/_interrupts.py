"""Ctrl-C around the ways out of a capture and of a gg.use_stream block: KeyboardInterrupt held back where
no ``try`` can cover it, and raised once the way out is done.

The ways out register here (``ways_out``: ``Capture.__exit__``, ``use_stream.__exit__``), so that this module
imports neither; gg.use_stream keeps its thread-local stack of chosen streams here (``stream_choices``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (no stubs) C functions: no Python frame, no check point
import _thread
import dis
import signal
import threading
from collections.abc import Callable
from types import CodeType, FrameType

# The code objects of the ways out whose entry is held back (each calls release_interrupts).
ways_out: list[CodeType] = []
# gg.use_stream's thread-local stack of chosen streams (attribute ``chosen``, gpugraph._current's): while one is
# open in the main thread, the stand-in stays.
stream_choices = threading.local()


# Ctrl-C. Python raises KeyboardInterrupt at the first check point after SIGINT arrives, and the first
# instruction of an ``__exit__`` is one: there the interrupt comes before any of its code can catch it, and
# the with statement leaves the capture running (measured: about 1 SIGINT in 100 sent during a capture
# loop). While a capture runs in the main thread, the only one KeyboardInterrupt reaches, and SIGINT has
# Python's default handler, _on_sigint stands in: at the entry of such a way out it notes the interrupt,
# which release_interrupts raises once the way out is done, and elsewhere it raises as the default does.
# Main thread only. The stand-in stays while a capture wants it (by owner, so that a guard and its release
# pair up whatever interrupts them) or a gg.use_stream block is open (its stack of chosen streams says so:
# nothing to miscount). Each release gives SIGINT back to the default handler when neither is left, so a
# guard that an interrupt cut short leaves nothing behind past the next release.
_interrupt_guards: set[object] = set()
_deferred_interrupt = False
_holding = 0  # how many without_interrupts calls run in the main thread: the stand-in holds back every interrupt
_MAIN_THREAD = threading.main_thread().ident


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _deferred_interrupt
    # One set lookup, no call: a second SIGINT arriving while this runs finds no check point before it.
    if frame is not None and (_holding or (frame.f_code, frame.f_lasti) in _held_points):
        _deferred_interrupt = True
        return
    signal.default_int_handler(signum, frame)


# The (code, bytecode offset) pairs where _on_sigint holds an interrupt back, found once, before the stand-in
# is first installed: in a way out (the capture's, gg.use_stream's) until its call of release_interrupts,
# since its first instruction is a check point no try can cover, and the end of a try before its finally
# is another; and in release_interrupts until it tests for a held-back interrupt, which it raises then.
# Never after the last release or that test: nothing would raise the interrupt later.
_held_points: frozenset[tuple[CodeType, int]] = frozenset()
_held_ways = 0  # how many ways out _held_points covers (a way out registered later is added)


def _find_held_points(ways: int) -> frozenset[tuple[CodeType, int]]:
    points: set[tuple[CodeType, int]] = set()
    for code in ways_out[:ways]:
        instructions = list(dis.get_instructions(code))
        released: set[int] = set()
        for at, load in enumerate(instructions):
            if load.opname == "LOAD_GLOBAL" and load.argval == "release_interrupts":
                after = instructions[at:]
                call = next(i for i in after if i.opname.startswith("CALL")).offset
                end = next(i for i in after if i.opname in ("RETURN_VALUE", "RETURN_CONST", "RERAISE")).offset
                released.update(range(call, end + 1))
        if not released:
            raise RuntimeError(f"gpugraph: no call of release_interrupts found in {code.co_name}")
        points.update((code, offset) for offset in range(-2, len(code.co_code)) if offset not in released)
    code = release_interrupts.__code__
    test = max(i.offset for i in dis.get_instructions(code)
               if i.opname == "LOAD_GLOBAL" and i.argval == "_deferred_interrupt")
    points.update((code, offset) for offset in range(-2, test + 1))
    return frozenset(points)


def guard_interrupts(owner: object | None = None) -> None:
    """Keep KeyboardInterrupt off the entry of a capture's way out until ``release_interrupts(owner)``.
    Call it inside the ``try`` whose ``finally`` releases ``owner``. gg.use_stream passes no owner: its
    open block keeps the stand-in."""
    global _held_points, _held_ways
    if _thread.get_ident() != _MAIN_THREAD:
        return
    ways = len(ways_out)
    if _held_ways != ways:
        _held_points, _held_ways = _find_held_points(ways), ways
    if _signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        _signal.signal(signal.SIGINT, _on_sigint)
    if owner is not None:
        _interrupt_guards.add(owner)  # last (no call after it: an interrupt cannot separate it from the try)


def release_interrupts(owner: object | None = None) -> None:
    """Undo ``guard_interrupts(owner)`` (when no capture and no gg.use_stream block wants the stand-in any
    more, SIGINT goes back to Python's default handler) and raise the KeyboardInterrupt that _on_sigint held
    back, if any. It calls C functions only: an interrupt at a check point in its own frame before its test
    of ``_deferred_interrupt`` is held back too, and raised by it."""
    global _deferred_interrupt
    if _thread.get_ident() != _MAIN_THREAD:
        return
    _interrupt_guards.discard(owner)
    if not _interrupt_guards and not getattr(stream_choices, "chosen", None) and \
            _signal.getsignal(signal.SIGINT) is _on_sigint:
        _signal.signal(signal.SIGINT, signal.default_int_handler)
    if _deferred_interrupt:
        _deferred_interrupt = False
        raise KeyboardInterrupt


def without_interrupts(fn: Callable[[], None]) -> None:
    """Call ``fn()`` with Ctrl-C held back until it returns, then raised: for a step that must not stop half
    way and cannot be made again (freeing a dropped graph's memory). Main thread, while SIGINT has Python's
    default handler (or the stand-in); elsewhere ``fn()`` runs as it is."""
    global _holding
    owner = object()
    # Counted in the main thread only: another thread's step must not hold back the main thread's Ctrl-C (which only
    # the main thread's own release raises), nor race the main thread's count.
    main = _thread.get_ident() == _MAIN_THREAD
    try:
        guard_interrupts(owner)
        _holding += main  # no call between this and the try: the finally always undoes it
        try:
            fn()
        finally:
            _holding -= main
    finally:
        release_interrupts(owner)
