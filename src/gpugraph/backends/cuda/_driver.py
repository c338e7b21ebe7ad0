"""Calling the CUDA driver through cuda-bindings: error checking and per-thread current contexts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NoReturn

from cuda.bindings import driver as cu

from ..._errors import BackendError
from ._symbols import drv

# What a result of a call means where CUDA's description does not say (measured on the H200).
_HINTS = {("cuLaunchKernel", "CUDA_ERROR_NOT_SUPPORTED"): "if the kernel launches graphs (cudaGraphLaunch): such a "
                                                          "kernel runs only as a kernel node of a graph"}


def error(api: str, code: Any) -> BackendError:
    """A BackendError for driver result ``code`` of call ``api``, with CUDA's name and description."""
    _, name = drv.get_error_name(code)
    _, text = drv.get_error_string(code)
    name = name.decode() if isinstance(name, bytes) else str(code)
    text = text.decode() if isinstance(text, bytes) else ""
    hint = _HINTS.get((api, name))
    return BackendError("cuda", api, name, f"{text}; {hint}" if hint else text, int(code))


def fail(api: str, code: int) -> NoReturn:
    """Raise the BackendError for driver result ``code`` (an int, as ``_leaves`` gives it) of ``api``."""
    raise error(api, cu.CUresult(code))


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a cuda-bindings function; raise BackendError on failure; return its single output or tuple."""
    result = fn(*args)
    if result[0]:
        raise error(fn.__name__, result[0])
    if len(result) == 2:
        return result[1]
    return result[1:] if len(result) > 2 else None


class Contexts:
    """Each device's primary context, made current on a thread before that thread's first call."""

    def __init__(self, count: int) -> None:
        self.devices = [call(drv.device_get, i) for i in range(count)]
        self._contexts: list[Any] = [None] * count
        self._local = threading.local()
        self._lock = threading.Lock()

    def get(self, index: int) -> Any:
        ctx = self._contexts[index]
        if ctx is None:
            with self._lock:
                if self._contexts[index] is None:
                    self._contexts[index] = call(drv.device_primary_ctx_retain, self.devices[index])
                ctx = self._contexts[index]
        return ctx

    def retained(self) -> list[int]:
        """The devices whose primary context this process has retained (those it has used)."""
        return [index for index, ctx in enumerate(self._contexts) if ctx is not None]

    def current(self) -> Any:
        """The context this thread made current through ``use`` (None before its first ``use``)."""
        return getattr(self._local, "ctx", None)

    def make_current(self, index: int) -> None:
        """Make device ``index``'s primary context current on this thread, whatever this thread's record says
        (another library may have made another one current since)."""
        ctx = self.get(index)
        call(drv.ctx_set_current, ctx)
        self._local.ctx = ctx

    def use(self, index: int) -> None:
        """Make device ``index``'s primary context current on this thread (a no-op when it already is)."""
        ctx = self.get(index)
        if getattr(self._local, "ctx", None) is not ctx:
            call(drv.ctx_set_current, ctx)
            self._local.ctx = ctx


def driver_version() -> int:
    """The driver's CUDA version as cuDriverGetVersion gives it (12030 for CUDA 12.3)."""
    return call(cu.cuDriverGetVersion)


def require_driver(version: int, what: str, api: str) -> None:
    """Raise, naming ``what`` and the CUDA version it needs, where the driver is older than ``version``."""
    have = driver_version()
    if have < version:
        raise BackendError("cuda", api, "CUDA_ERROR_NOT_SUPPORTED",
                           f"{what} needs a driver of CUDA {version // 1000}.{version % 1000 // 10} or newer; this "
                           f"driver is CUDA {have // 1000}.{have % 1000 // 10} (cuDriverGetVersion: {have}): update "
                           f"the NVIDIA driver")
