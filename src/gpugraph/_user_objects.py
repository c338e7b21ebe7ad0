"""UserObject: a resource whose lifetime follows the graphs and executable graphs that use it.

CUDA's user objects (cudaUserObjectCreate, HIP's hipUserObjectCreate) count references: the caller's, and those
of graphs that retain the object. The backend keeps a graph's references in its copies (clones, child-graph nodes)
and in executable graphs made from it until their work is done, so the destructor runs after the last launch that
could use the resource, without the caller waiting for it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ._errors import GraphError
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._scalars import as_int, describe

# The most references one call may create, retain, move or release: CUDA's INT_MAX (cudaUserObjectRetain: "must be
# nonzero and not larger than INT_MAX"; the counts are C ints there).
MAX_COUNT = 2**31 - 1


def count_of(count: Any, what: str) -> int:
    """``count``, checked to be a positive int of at most ``MAX_COUNT`` (a number of references)."""
    number = as_int(count)
    if number is None:
        raise TypeError(f"{what}(count): expected a positive int, got {describe(count)}")
    if number < 1:
        raise ValueError(f"{what}(count): expected a positive int, got {number}")
    if number > MAX_COUNT:
        raise ValueError(f"{what}(count): at most {MAX_COUNT} references a call (CUDA's INT_MAX), got {number}")
    return number


def _release_held(backend: Any, handle: Any, held: list[int]) -> None:
    """(The finalizer of a UserObject: the caller's references it still holds go with it.)"""
    count, held[0] = held[0], 0
    if count:
        backend.user_object_release(handle, count, collected=True)


class UserObject:
    """A destructor that runs once every reference to the object is released. Made by ``Device.user_object``.

    The caller holds the references it was made with; ``retain`` and ``release`` change that count, and the ones
    still held are released when the object is collected. Graphs hold their own (``Graph.retain_user_object``),
    which their clones, child-graph nodes and executable graphs keep until their work is done. ``destroy`` runs on
    a thread of the backend (the driver's on CUDA), where gpugraph calls are refused; an exception it raises is
    printed to stderr, as Python prints one that a ``__del__`` raises.

    See also: cudaUserObjectCreate, cudaUserObjectRetain, cudaUserObjectRelease.
    """

    __slots__ = ("_backend", "_handle", "_held", "_lock", "__weakref__")

    def __init__(self, backend: Any, destroy: Callable[[], Any], count: int) -> None:
        """(Made by ``Device.user_object``.)"""
        if not callable(destroy):
            raise TypeError(f"user_object(destroy): expected a callable, got {type(destroy).__name__}")
        if HOST_THREADS:
            refuse_in_host_function("Device.user_object")
        count = count_of(count, "user_object")

        def run() -> None:
            try:
                destroy()
            except BaseException as exc:  # noqa: BLE001 - printed, as Python prints a __del__'s: nobody waits for it
                print(f"Exception ignored in the destroy of a UserObject, {destroy!r}:", file=sys.stderr)
                traceback.print_exception(exc, file=sys.stderr)

        self._backend = backend
        self._lock = threading.Lock()
        self._handle = backend.user_object_create(run, count)
        self._held = [count]  # (a cell the finalizer shares)
        weakref.finalize(self, _release_held, backend, self._handle, self._held).atexit = False

    @property
    def references(self) -> int:
        """How many references the caller holds."""
        return self._held[0]

    def retain(self, count: int = 1) -> None:
        """Take ``count`` more references for the caller.

        Raises:
            GraphError: If the caller holds none (the object may be gone).
        """
        count = count_of(count, "UserObject.retain")
        if HOST_THREADS:
            refuse_in_host_function("UserObject.retain")
        with self._lock:
            self._check_held("UserObject.retain")
            self._backend.user_object_retain(self._handle, count)
            self._held[0] += count

    def release(self, count: int = 1) -> None:
        """Release ``count`` of the caller's references; the last reference of all runs ``destroy``.

        Raises:
            GraphError: If the caller holds fewer than ``count``.
        """
        count = count_of(count, "UserObject.release")
        if HOST_THREADS:
            refuse_in_host_function("UserObject.release")
        with self._lock:
            if count > self._held[0]:
                raise GraphError(f"UserObject.release({count}): the caller holds {self._held[0]} reference(s)")
            self._held[0] -= count  # (first: an interrupt after it leaves a reference unreleased, never one too many)
            try:
                self._backend.user_object_release(self._handle, count, collected=False)
            except Exception:
                self._held[0] += count
                raise

    def _check_held(self, what: str) -> None:
        if not self._held[0]:
            raise GraphError(f"{what}: the caller holds no reference to {self!r}, so it may be gone; keep one while "
                             f"handing references out")

    def _give(self, count: int, what: str) -> None:
        """Hand ``count`` of the caller's references to a graph (a move)."""
        if count > self._held[0]:
            raise GraphError(f"{what}(move=True): the caller holds {self._held[0]} reference(s) of {self!r}, not "
                             f"{count}")
        self._held[0] -= count

    def __repr__(self) -> str:
        return f"UserObject({self._backend.name}, references={self._held[0]})"


# What a graph does with a UserObject (Graph.retain_user_object, release_user_object): the object's fields are its
# own.


def user_object_handle(obj: UserObject) -> Any:
    """The backend's handle of ``obj``: what a backend's graph calls retain and release it by."""
    return obj._handle


def of_backend(obj: UserObject, backend: object) -> bool:
    """Whether ``obj`` was made by ``backend`` (a graph holds references only to its own backend's)."""
    return obj._backend is backend


@contextlib.contextmanager
def handing_to_graph(obj: UserObject, count: int, move: bool, graph_lock: AbstractContextManager[Any],
                     what: str) -> Iterator[Any]:
    """Hand ``count`` references to ``obj`` to a graph: new ones, or, with ``move``, the caller's (refused where it
    holds too few). The block, under obj's lock and then the graph's ``graph_lock``, has the backend retain them by
    the handle it is given, and the graph note them; where it raises (the backend refused), the caller keeps its
    references."""
    with obj._lock, graph_lock:
        if move:
            obj._give(count, what)
        else:
            obj._check_held(what)
        try:
            yield obj._handle
        except Exception:  # (refused: the caller keeps them; an interrupt may come after the driver took them)
            if move:
                obj._held[0] += count
            raise
