"""HotCalls: the calls of a backend that gpugraph's compiled core makes on its hot paths, typed, so that the core
calls them directly (compiled: a C call through the class's table, no Python call between).

A backend that has such calls gives an instance of a subclass as its ``hot`` attribute (the CUDA backend's is
``gpugraph.backends.cuda._leaves.CudaHot``); one that has none gives None, and the core takes its Python path,
which calls the backend's protocol methods (``gpugraph.backends._protocol``). Handles come in as addresses (ints:
a stream's is ``Backend.stream_address``'s); each call returns the driver's result as an int (0: done), and checks
nothing but what the driver could not survive (a node set outside its context: ``exec_kernel_node_set``): the core
makes a call only where its Python path would make exactly this one, and where the driver refuses, the Python path
makes it again and explains the refusal as it explains any other (a Param patch, ``_exec_state.KernelPatch``, makes
its context current and sets again once, then raises the refusal).

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython; plain elsewhere.
"""

from __future__ import annotations

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from .. import _cython as cython


@cython.cclass
class HotCalls:
    """The hot calls of one backend (abstract: a backend's subclass makes them)."""

    def graph_address(self, exec_: object) -> int:
        """The address the hot launch takes for the executable graph ``exec_``, or 0 where only the backend's
        ``exec_launch`` can launch it (a graph that allocates, frees or runs host functions)."""
        raise NotImplementedError

    def graph_launch(self, graph_exec: int, stream: int) -> int:
        """cudaGraphLaunch of the executable graph at ``graph_exec`` on the stream at ``stream`` (the GIL released:
        a launch may wait for room in the stream's queue, which a host function needing the GIL would free)."""
        raise NotImplementedError

    def launch_kernel(self, function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                      block_z: int, shared_mem: int, stream: int, kernel_params: int) -> int:
        """cudaLaunchKernel of the loaded kernel at ``function`` on the stream at ``stream``: ``kernel_params`` is
        the address of its arguments' addresses (``gpugraph._argpack.Slots``; the driver copies them)."""
        raise NotImplementedError

    def captured_launch(self, capture: object, record: object, function: int, grid_x: int, grid_y: int, grid_z: int,
                        block_x: int, block_y: int, block_z: int, shared_mem: int, stream: int,
                        kernel_params: int) -> int:
        """``launch_kernel`` into ``capture`` (the backend's record of the capture ``stream`` takes part in), while it
        is active, queueing ``record`` (the node's ``KernelParams``) as the backend pairs captured calls with their
        nodes: 0 once done; nonzero, nothing launched or queued, where the driver refuses or the capture no longer
        records (another thread ended it: the launch is then the checked path's, uncaptured)."""
        raise NotImplementedError

    def node_setter(self, exec_: object) -> tuple[int, int]:
        """The addresses ``exec_kernel_node_set`` takes for the executable graph ``exec_`` and for the context it
        must be made in, or (0, 0) where only the backend's ``exec_set_node`` sets its nodes (a graph kernels launch,
        which is uploaded again after each change)."""
        raise NotImplementedError

    def node_address(self, node: object) -> int:
        """The address ``exec_kernel_node_set`` takes for the backend's node handle ``node``."""
        raise NotImplementedError

    def exec_kernel_node_set(self, graph_exec: int, context: int, node: int, function: int, grid_x: int,
                             grid_y: int, grid_z: int, block_x: int, block_y: int, block_z: int, shared_mem: int,
                             kernel_params: int) -> int:
        """cudaGraphExecKernelNodeSetParams: the kernel node at ``node`` of the executable graph at ``graph_exec``
        runs ``function`` with this shape and these arguments (the driver copies them). Made only where the
        context at ``context`` is this thread's current one (else the driver's CUDA_ERROR_INVALID_CONTEXT, with
        nothing called: the driver may crash on such a set rather than refuse it)."""
        raise NotImplementedError
