# cython: language_level=3, boundscheck=False, wraparound=False
"""gpugraph's compiled CUDA calls: the driver calls of the paths users repeat, made through
``cuda.bindings.cydriver`` (as cuda.core makes them) instead of cuda-bindings' Python wrappers.

Handles come in as ints (``int()`` of a cuda-bindings handle object is its value); each call returns the
``CUresult`` as an int, which the caller turns into gpugraph's error. The GIL is released around each driver
call: a launch may wait for room in the stream's queue, which a host function holding the GIL would free.
The HIP twin of each call is the same call through hip-python's ``chip`` declarations.
"""

from libc.stdint cimport uintptr_t
from cuda.bindings cimport cydriver


def launch_kernel(uintptr_t function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                  unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_mem,
                  uintptr_t stream, uintptr_t kernel_params):
    """cuLaunchKernel (hipModuleLaunchKernel): ``kernel_params`` is the address of the argument pointers."""
    cdef cydriver.CUresult err
    with nogil:
        err = cydriver.cuLaunchKernel(<cydriver.CUfunction>function, grid_x, grid_y, grid_z, block_x, block_y,
                                      block_z, shared_mem, <cydriver.CUstream>stream, <void**>kernel_params, NULL)
    return <int>err


def graph_launch(uintptr_t graph_exec, uintptr_t stream):
    """cuGraphLaunch (hipGraphLaunch)."""
    cdef cydriver.CUresult err
    with nogil:
        err = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>graph_exec, <cydriver.CUstream>stream)
    return <int>err
