"""Event: a marker in a stream's work that orders work across streams and times it."""

from __future__ import annotations

import weakref
from typing import Any

from . import _capture_rules
from ._device_like import DeviceLike
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._scalars import as_bool
from .backends import get_backend


class Event:
    """A marker in a stream's work; created by ``Device.event`` or ``Stream.record``.

    See also: cudaEventCreateWithFlags.
    """

    __slots__ = ("device", "timing", "_backend", "_handle", "_capture", "__weakref__")

    def __init__(self, device: DeviceLike, timing: bool) -> None:
        if as_bool(timing) is None:  # (not truthiness: the string 'no' is truthy)
            raise TypeError(f"event: timing must be a bool, got {timing!r}")
        self.device: Any = device  # (a Device: not named here, since gpugraph._device imports this module)
        self.timing = bool(timing)
        self._backend = get_backend(device.backend)
        self._handle = self._backend.event_create(device.index, self.timing)
        self._capture: Any = None  # the capture the event was last recorded in, if any
        weakref.finalize(self, self._backend.event_destroy, self._handle).atexit = False

    def _check_not_captured(self, api: str) -> None:
        capture = self._capture
        if capture is not None and capture.active:
            raise _capture_rules.invalidate([capture], api, "the event was last recorded inside a capture, so it "
                                                             "marks work that has not run and cannot be waited for")

    def synchronize(self) -> None:
        """Block until the work before the event's last record has finished."""
        self._check_not_captured("Event.synchronize")
        _capture_rules.forbid_unsafe("Event.synchronize", _capture_rules.WAIT_RULE)
        self._backend.event_synchronize(self._handle)

    @property
    def done(self) -> bool:
        """Whether the work before the event's last record has finished (True if never recorded)."""
        self._check_not_captured("Event.done")
        if HOST_THREADS:
            refuse_in_host_function("Event.done")
        _capture_rules.forbid_unsafe("Event.done", _capture_rules.WAIT_RULE)
        return self._backend.event_query(self._handle)

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds between this event's last record and ``end``'s.

        Raises:
            TypeError: If ``end`` is not an Event.
            ValueError: If either event was made with ``timing=False``, or has not completed.
        """
        if not isinstance(end, Event):
            raise TypeError(f"elapsed_ms(end): expected an Event, got {type(end).__name__}")
        for which, event in (("start", self), ("end", end)):
            if not event.timing:
                raise ValueError(f"elapsed_ms: the {which} event was created with timing=False")
            if not event.done:
                raise ValueError(f"elapsed_ms: the {which} event has not completed; synchronize it first")
        return self._backend.event_elapsed_ms(self._handle, end._handle)

    def __repr__(self) -> str:
        return f"Event(device={self.device}, timing={self.timing})"


def event_handle(event: Event) -> Any:
    """The backend's handle of ``event``: what a backend's event-record and event-wait nodes name it by."""
    return event._handle


def recorded_in(event: Event) -> Any:
    """The capture ``event`` was last recorded in (it may have ended since), or None: recorded outside any."""
    return event._capture


def note_recorded(event: Event, capture: object) -> None:
    """``event`` was just recorded in ``capture`` (None: outside any capture, or a launch recorded it)."""
    event._capture = capture
