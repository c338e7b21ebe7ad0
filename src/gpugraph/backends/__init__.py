"""Backend registry: loads each backend lazily, once, and remembers why one is unavailable."""

from __future__ import annotations

import importlib
import threading

from .._errors import BackendUnavailableError
from ._protocol import Backend

# Preference order for Device() with no argument: the best backend present first.
BACKEND_ORDER = ("cuda", "hip", "cpu")
_MODULES = {"cuda": "gpugraph.backends.cuda", "cpu": "gpugraph.backends.cpu"}
_HOW_TO_GET = {
    "hip": "the HIP backend (hip-python) is planned but not part of this gpugraph release; "
           "use 'cuda' or 'cpu'",
}

_lock = threading.Lock()
_loaded: dict[str, Backend] = {}
# Why each unavailable backend is unavailable. Each refusal raises a new error: a raised error keeps the
# frames it passed through (and their locals) alive, so one shared error object would leak them.
_failed: dict[str, str] = {}


def get_backend(name: str) -> Backend:
    """Return the loaded backend ``name``.

    Raises:
        BackendUnavailableError: If the backend's package, driver or devices are missing.
        ValueError: If ``name`` is not a backend gpugraph knows.
    """
    backend = _loaded.get(name)
    if backend is not None:
        return backend
    if name not in BACKEND_ORDER:
        raise ValueError(f"backend: expected one of {', '.join(BACKEND_ORDER)}, got {name!r}")
    with _lock:
        if name in _loaded:
            return _loaded[name]
        if name in _failed:
            raise BackendUnavailableError(_failed[name])
        try:
            if name not in _MODULES:
                raise BackendUnavailableError(f"{name}: {_HOW_TO_GET[name]}")
            module = importlib.import_module(_MODULES[name])
            backend = module.create_backend()
        except BackendUnavailableError as exc:
            _failed[name] = str(exc)
            raise
        _loaded[name] = backend
        return backend


def loaded_backends() -> list[Backend]:
    """The backends loaded so far (those any Device, Stream or Array can belong to)."""
    return list(_loaded.values())


def available_backends() -> list[str]:
    """Names of the backends usable here, best first; never empty.

    Raises:
        BackendUnavailableError: If no backend is usable: only where the CPU backend, the last resort, is
            configured wrongly (``$GPUGRAPH_CPU_DEVICES``); its message says how.
    """
    names = []
    for name in BACKEND_ORDER:
        try:
            get_backend(name)
        except BackendUnavailableError:
            continue
        names.append(name)
    if not names:
        # The last resort's own reason: the others' (no driver, no package) are expected on a machine without
        # a GPU, and would bury the one thing to fix.
        raise BackendUnavailableError(_failed[BACKEND_ORDER[-1]])
    return names
