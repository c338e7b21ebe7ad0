"""StreamState: the fields of a Stream, which the compiled core reads on its hot paths, and a kernel launch's common
case, which the compiled core makes itself.

``gpugraph._stream.Stream`` is its one subclass, and makes, reads and sets the fields, so that a compiled caller (an
executable graph's launch) reads a stream's fields as C fields; ``launch`` is Stream's, its every case but the
common one Stream's checked path (``_launch_checked``).

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython, ``StreamState`` is a C class whose
fields ``_stream_state.pxd`` declares; plain, a Python class with the same fields as slots.
"""

from __future__ import annotations

from typing import Any

from ._capture_rules import function_captures
from ._hazards import CHECKING
from ._host_threads import HOST_THREADS
from ._kernel import Kernel, launch_dims, loaded_function
from ._nodes import KernelParams

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from . import _cython as cython

if cython.compiled:
    from cython.cimports.gpugraph._argpack import Layout, write_common
    from cython.cimports.gpugraph.backends._hot import HotCalls
    from cython.cimports.libc.stdint import uint64_t
else:
    from ._argpack import Layout
    from .backends._hot import HotCalls

MAX_SLOTS = 32  # the arguments of a launch the compiled core packs on its stack (more: the checked path)
# KernelParams (a NamedTuple) made as tuple.__new__(KernelParams, fields), without its Python __new__: a fifth of the
# cost, on a path that makes one record per captured launch.
_tuple_new = tuple.__new__
@cython.cclass
class StreamState:
    """A Stream's fields (never made alone: a Stream is one). ``_hot``: its backend's hot calls
    (``gpugraph.backends._hot``), or None; ``_hot_address``: the address they take for it, 0 where they take none
    (the legacy default stream, whose every call the front end checks against captures; a Stream subclass; a
    backend without hot calls)."""

    if not cython.compiled:  # (compiled, _stream_state.pxd declares the fields)
        __slots__ = ("device", "non_blocking", "priority", "legacy", "_backend", "_handle", "_capture", "_number",
                     "_hot", "_hot_address", "__weakref__")
        device: Any  # its Device
        _capture: Any  # the Capture it records into, if any
        _hot: HotCalls | None
        _hot_address: int

    def launch(self, kernel: Kernel, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> None:
        """Enqueue ``kernel<<<grid, block, shared_mem, self>>>(*args)``.

        Raises:
            TypeError: If ``kernel`` is not a Kernel or an argument has an unsupported type.
            ValueError: If grid/block/shared_mem are out of range.
            KernelCompileError: If the kernel fails to compile for this device.
            GraphError: Outside a capture, if the kernel launches graphs (takes a ``cudaGraphExec_t``): such a
                kernel runs only as a kernel node of a graph.
            GpuGraphError: If the backend cannot run the kernel (no CPU implementation, say).

        See also: cudaLaunchKernel.
        """
        if cython.compiled:
            # The common case, launched from here: a 1-D launch, no dynamic shared memory, of a Kernel loaded on
            # the stream's device whose signature types every slot, with arguments its slots take as they are
            # (_argpack.write_common), outside host functions, on a stream with a hot address: uncaptured (and
            # outside @captured captures), or into a capture with no error, recorded as the checked path records
            # it (unless hazard checking notes each captured call). The driver copies the arguments: they are
            # packed on the C stack. Anything else, or a driver's refusal, takes the checked path, which launches or
            # explains.
            hot = cython.declare(HotCalls, self._hot)
            capture = self._capture
            if (hot is not None and self._hot_address != 0 and type(shared_mem) is int and shared_mem == 0
                    and type(kernel) is Kernel and not HOST_THREADS and type(grid) is int and type(block) is int
                    and 1 <= grid <= 0x7FFFFFFF and 1 <= block <= 1024 and len(args) <= MAX_SLOTS
                    and (not function_captures if capture is None else capture.error is None and not CHECKING)):
                layout = getattr(loaded_function(kernel, self.device), "layout", None)  # (None: not loaded, untyped)
                if type(layout) is Layout:
                    slots = cython.declare(uint64_t[32])
                    pointers = cython.declare(cython.p_void[32])
                    typed: list[Any] | None = None if capture is None else []
                    count = cython.declare(cython.Py_ssize_t, write_common(
                        cython.cast(Layout, layout).codes, cython.cast(Layout, layout).wants, self.device, args,
                        cython.cast(cython.p_char, slots), typed))
                    i = cython.declare(cython.Py_ssize_t)
                    if count >= 0:
                        for i in range(count):
                            pointers[i] = cython.address(slots[i])
                        function = cython.cast(Layout, layout).function
                        if capture is None:
                            err = hot.launch_kernel(function, grid, 1, 1, block, 1, 1, 0, self._hot_address,
                                                    cython.cast(cython.size_t, pointers))
                        else:
                            dims = launch_dims(grid, block)  # (the shapes' shared tuples, as the checked path's)
                            record = _tuple_new(KernelParams, (kernel, dims[0], dims[1], 0, tuple(typed or ()),
                                                               self.device.index))
                            # (The capture's backend record, read directly: a Capture's field, on its hottest path.)
                            err = hot.captured_launch(capture._handle, record, function, grid, 1, 1, block, 1, 1, 0,
                                                      self._hot_address, cython.cast(cython.size_t, pointers))
                        if err == 0:
                            return
        self._launch_checked(kernel, grid, block, args, shared_mem)

    def _launch_checked(self, kernel: Kernel, grid: object, block: object, args: tuple, shared_mem: int) -> None:
        """Every launch but the common case (Stream's)."""
        raise NotImplementedError
