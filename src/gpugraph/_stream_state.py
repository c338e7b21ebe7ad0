"""StreamState: the fields of a Stream, which the compiled core reads on its hot paths.

``gpugraph._stream.Stream`` is its one subclass, and makes, reads and sets them; this module only holds them, so
that a compiled caller (an executable graph's launch) reads a stream's fields as C fields. It imports nothing of
gpugraph.

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython, ``StreamState`` is a C class whose
fields ``_stream_state.pxd`` declares; plain, a Python class with the same fields as slots.
"""

from __future__ import annotations

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from . import _cython as cython


@cython.cclass
class StreamState:
    """A Stream's fields (never made alone: a Stream is one). ``_hot_address``: the address its backend's hot calls
    take for it (``gpugraph.backends._hot``), 0 where they take none (the legacy default stream, whose every call
    the front end checks against captures; a backend without hot calls)."""

    if not cython.compiled:  # (compiled, _stream_state.pxd declares the fields)
        __slots__ = ("device", "non_blocking", "priority", "legacy", "_backend", "_handle", "_capture", "_number",
                     "_fast", "_hot_address", "__weakref__")
