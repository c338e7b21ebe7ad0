"""Host functions on CUDA: one C trampoline that calls registered Python callables.

The driver calls the trampoline on its own thread with the registry key as user data. An exception a
callable raises is kept for the stream the work ran on and raised at that stream's next synchronize, or
at the device's next synchronize (a destroyed stream's too).
A stream's host function is dropped once it has run; a graph's lives as long as a CUDA user object that
the graph owns, which the driver keeps through clones, instantiations, child graphs and launches still
running, and destroys after the last of them (cudaUserObjectCreate, cudaGraphRetainUserObject).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as cu

from ..._host_threads import HOST_THREADS
from ._driver import call
from ._symbols import drv

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class HostCalls:
    """Registered host callables; ``one_shot`` entries (stream host functions) are dropped once run."""

    def __init__(self) -> None:
        self._entries: dict[int, list[Any]] = {}
        self._keys = itertools.count(1)
        self.errors: dict[Any, BaseException] = {}  # first pending error per stream
        # .in_callback: the driver is calling back on this thread (a host function, a graph's user-object
        # destructor). CUDA refuses CUDA calls there, so a release that a garbage-collected object asks for
        # meanwhile waits (CudaRuntime._release). The driver may call back on a thread of its own or (under
        # compute-sanitizer) on the caller's, so the mark lasts exactly as long as the callback.
        self.local = threading.local()
        self._trampoline = _CALLBACK(self._run)  # kept alive as long as the registry
        self.fn = cu.CUhostFn(ctypes.cast(self._trampoline, ctypes.c_void_p).value)
        self._forgetter = _CALLBACK(self._forget)
        self._forget_fn = cu.CUhostFn(ctypes.cast(self._forgetter, ctypes.c_void_p).value)

    def own_by_graph(self, key: int, graph: Any) -> None:
        """Make ``graph`` own the entry: it goes when the driver lets go of the graph's last copy."""
        obj = call(drv.user_object_create, key, self._forget_fn, 1,
                   cu.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        call(drv.graph_retain_user_object, graph, obj, 1, cu.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE)

    def _forget(self, user_data: int | None) -> None:
        local = self.local
        was, local.in_callback = getattr(local, "in_callback", False), True
        try:
            self._entries.pop(user_data or 0, None)  # (the arguments it held may go now: inside the mark)
        finally:
            local.in_callback = was

    def forget(self, key: int) -> None:
        """Drop a callable nothing will call again."""
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, fn: Callable[..., Any], args: tuple, stream: Any, one_shot: bool) -> int:
        key = next(self._keys)
        self._entries[key] = [fn, args, stream, one_shot]
        return key

    def set_stream(self, key: int, stream: Any) -> None:
        """Attribute later errors of a graph's host node to the stream the graph is launched on."""
        entry = self._entries.get(key)
        if entry is not None:
            entry[2] = stream

    def _run(self, user_data: int | None) -> None:
        local = self.local
        was, local.in_callback = getattr(local, "in_callback", False), True
        try:
            self._call(user_data or 0)  # ctypes passes a NULL pointer as None; keys start at 1
        finally:
            local.in_callback = was  # (after _call's frame, and the references it held, are gone)

    def _call(self, key: int) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        fn, args, stream, one_shot = entry
        if one_shot:
            del self._entries[key]
        ident = threading.get_ident()
        HOST_THREADS.add(ident)  # gpugraph calls that wait or enqueue are refused here (gpugraph._host_threads)
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - raised at the stream's next synchronize
            self.errors.setdefault(stream, exc)
        finally:
            HOST_THREADS.discard(ident)

    def callable(self, key: int) -> Any:
        """The Python callable behind a host node (None for host nodes of other libraries)."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def take_error(self, stream: Any) -> BaseException | None:
        return self.errors.pop(stream, None)
