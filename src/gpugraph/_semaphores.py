"""External semaphores: another API's semaphores (Vulkan's, say) imported into a device, which streams and graph
nodes signal and wait on (hipImportExternalSemaphore, hipSignalExternalSemaphoresAsync, the external semaphore
signal and wait nodes); and the CPU backend's stand-in for such a semaphore."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ._device_like import DeviceLike
from ._nodes import NodeKind, SemaphoreSignalParams, SemaphoreWaitParams
from ._scalars import as_bool, as_int, describe
from ._timeouts import timeout_seconds
from .backends import get_backend

_MAX_VALUE = 2**64 - 1


def _check_timeline(timeline: Any, what: str) -> bool:
    flag = as_bool(timeline)
    if flag is None:
        raise TypeError(f"{what}: timeline must be a bool, got {describe(timeline)}")
    return flag


def check_value(value: Any, what: str) -> int:
    """A timeline value as an int from 0 to 2**64 - 1, or raise naming what was got."""
    number = as_int(value)
    if number is None or not 0 <= number <= _MAX_VALUE:
        raise ValueError(f"{what}: a timeline semaphore's value is an int from 0 to 2**64 - 1, got {value!r}")
    return number


class EmulatedSemaphore:
    """A semaphore of another API, emulated on the host: what the CPU backend imports where a GPU backend imports
    a Vulkan semaphore's file descriptor (``Device.import_semaphore``). The host signals it, reads it and waits on it
    as that API's host calls would (vkSignalSemaphore, vkGetSemaphoreCounterValue, vkWaitSemaphores).

    A timeline semaphore holds a counter that only grows; a binary one is signaled or not, and a wait takes its
    signal.
    """

    def __init__(self, value: int = 0, *, timeline: bool = True) -> None:
        self.timeline = _check_timeline(timeline, "EmulatedSemaphore")
        if not timeline and value not in (0, 1):
            raise ValueError(f"EmulatedSemaphore: a binary semaphore starts signaled (1) or not (0), got {value!r}")
        self._value = check_value(value, "EmulatedSemaphore")
        self._changed = threading.Condition()

    def __repr__(self) -> str:
        return f"EmulatedSemaphore({'timeline' if self.timeline else 'binary'}, value={self._value})"

    @property
    def value(self) -> int:
        """The counter of a timeline semaphore; 1 or 0 for a binary one (signaled or not)."""
        return self._value

    def signal(self, value: int | None = None) -> None:
        """Signal from the host: a timeline semaphore to ``value``, which must be greater than its counter (Vulkan's
        rule), a binary one (no value)."""
        if self.timeline:
            value = check_value(value, "EmulatedSemaphore.signal")
            if value <= self._value:
                raise ValueError(f"EmulatedSemaphore.signal: a timeline semaphore's new value must be greater than its "
                                 f"value now, {self._value}; got {value}")
        elif value is not None:
            raise ValueError(f"EmulatedSemaphore.signal: a binary semaphore takes no value, got {value!r}")
        signal_emulated(self, value)

    def wait(self, value: int | None = None, timeout: float | None = None) -> bool:
        """Whether the semaphore was signaled within ``timeout`` seconds (0: whether it is now; None or inf: no
        limit): a timeline one to at least ``value``; a binary one, whose signal the wait takes.

        Raises:
            TypeError: If ``timeout`` is not a number or None.
            ValueError: If ``value`` is not what the semaphore takes, or ``timeout`` is NaN or negative.
        """
        if self.timeline:
            value = check_value(value, "EmulatedSemaphore.wait")
        elif value is not None:
            raise ValueError(f"EmulatedSemaphore.wait: a binary semaphore takes no value, got {value!r}")
        return wait_emulated(self, value, timeout_seconds(timeout, "EmulatedSemaphore.wait", zero=True))


# What a stream or a graph node does to an emulated semaphore (the CPU backend runs them), which the host's calls
# above do too once they have checked their arguments.


def signal_emulated(semaphore: EmulatedSemaphore, value: int | None) -> None:
    """Signal ``semaphore``, as a stream or a node does: a timeline semaphore's counter grows to ``value`` (a smaller
    value leaves it, as a counter never goes back), a binary one is signaled."""
    with semaphore._changed:
        semaphore._value = max(semaphore._value, value) if semaphore.timeline and value is not None else 1
        semaphore._changed.notify_all()


def wait_emulated(semaphore: EmulatedSemaphore, value: int | None, timeout: float | None = None) -> bool:
    """Wait on ``semaphore``, as a stream or a node does (no limit) or the host does: whether it was signaled within
    ``timeout`` seconds (a binary one's signal is taken)."""
    with semaphore._changed:
        if semaphore.timeline:
            least = value or 0
            return semaphore._changed.wait_for(lambda: semaphore._value >= least, timeout)
        if not semaphore._changed.wait_for(lambda: semaphore._value == 1, timeout):
            return False
        semaphore._value = 0
        return True


class ExternalSemaphore:
    """A semaphore of another API imported into a device (``Device.import_semaphore``): streams and graph nodes of
    that device signal and wait on it. Released when collected (and graphs and executable graphs that use it hold
    it).

    See also: hipImportExternalSemaphore, cudaImportExternalSemaphore, cudaDestroyExternalSemaphore.
    """

    __slots__ = ("device", "timeline", "_handle", "__weakref__")

    def __init__(self, device: DeviceLike, handle: Any, timeline: Any) -> None:
        self.device: Any = device  # (a Device: not named here, since gpugraph._device imports this module)
        self.timeline = _check_timeline(timeline, "import_semaphore")
        backend = get_backend(device.backend)
        self._handle = backend.semaphore_import(device.index, handle, self.timeline)
        weakref.finalize(self, backend.semaphore_destroy, self._handle).atexit = False

    def __repr__(self) -> str:
        return f"ExternalSemaphore({'timeline' if self.timeline else 'binary'}, device={self.device})"


def values_for(semaphores: tuple, values: Any, what: str) -> tuple[int, ...]:
    """The value each of ``semaphores`` is signaled to or waited for: ``values`` one int for all or one per
    semaphore; None (binary semaphores only) is 0 each. A binary semaphore takes 0 alone."""
    if values is None:
        timeline = next((semaphore for semaphore in semaphores if semaphore.timeline), None)
        if timeline is not None:
            raise ValueError(f"{what}: {timeline!r} is a timeline semaphore, signaled to and waited for at a value; "
                             f"give values")
        values = (0,) * len(semaphores)
    elif isinstance(values, (list, tuple)):
        if len(values) != len(semaphores):
            raise ValueError(f"{what}: {len(values)} values for {len(semaphores)} semaphores; give one per semaphore "
                             f"or one for all")
    else:
        values = (values,) * len(semaphores)
    out = tuple(check_value(v, f"{what}(values)") for v in values)
    for semaphore, value in zip(semaphores, out):
        if not semaphore.timeline and value:
            raise ValueError(f"{what}: {semaphore!r} is binary and takes no value (0), got {value}")
    return out


def semaphores_for(device: DeviceLike, semaphores: Any, what: str) -> tuple:
    """``semaphores`` (one ExternalSemaphore or a sequence of them) as a tuple of at least one, all of ``device``."""
    found = (semaphores,) if isinstance(semaphores, ExternalSemaphore) else semaphores
    if not isinstance(found, (list, tuple)):
        raise TypeError(f"{what}: expected an ExternalSemaphore or a list of them, got {type(semaphores).__name__}")
    if not found:
        raise ValueError(f"{what}: no semaphores given (a node of none does nothing; add an empty node instead)")
    for semaphore in found:
        if not isinstance(semaphore, ExternalSemaphore):
            raise TypeError(f"{what}: expected ExternalSemaphores (Device.import_semaphore), got "
                            f"{type(semaphore).__name__}")
        if semaphore.device is not device:
            raise ValueError(f"{what}: {semaphore!r} was imported into {semaphore.device}, not {device}, where this "
                             f"work runs")
    return tuple(found)


def semaphore_record(device: DeviceLike, kind: NodeKind, semaphores: Any, values: Any,
                     what: str) -> SemaphoreSignalParams | SemaphoreWaitParams:
    """A semaphore signal or wait node's record (``kind``) on ``device``: at least one ExternalSemaphore of that
    device, each with its value (``values_for``)."""
    found = semaphores_for(device, semaphores, what)
    numbers = values_for(found, values, what)
    if kind is NodeKind.SEMAPHORE_SIGNAL:
        return SemaphoreSignalParams(found, numbers)
    return SemaphoreWaitParams(found, numbers)


def semaphore_handle(semaphore: ExternalSemaphore) -> Any:
    """The backend's handle of ``semaphore``: what a backend's semaphore nodes and calls name it by."""
    return semaphore._handle
