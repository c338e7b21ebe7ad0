# cython: language_level=3
"""The in-process floor of gpugraph's CUDA hot paths: each method of ``Calls`` is the thinnest Python call into C
that makes the same driver call a gpugraph call makes (one argument struct prepared once, nothing checked, the GIL
held), for the kernel ``tiny(float* x, int n)`` with ``n = 32``. Timed from Python like gpugraph's calls, they show
what any Python API must add per call; the bench's "hot" workload times them beside gpugraph and its peers.

A measuring instrument, not a path gpugraph takes: setup.py builds it beside the compiled CUDA path, from the same
headers, where it can.
"""
from libc.stdint cimport uintptr_t
from libc.string cimport memset
from cuda.bindings cimport cydriver


cdef int check(cydriver.CUresult err, str call) except -1:
    """Raise on a driver error (the floor times calls that must succeed)."""
    if err != cydriver.CUDA_SUCCESS:
        raise RuntimeError(f"gpugraph bench floor: {call} failed with CUresult {<int>err}")
    return 0


cdef class Node:
    """A graph node added by ``Calls.add`` (its driver handle)."""

    cdef uintptr_t raw

    def __cinit__(self, uintptr_t raw):
        self.raw = raw


cdef class Calls:
    """One driver call per method, tiny(x, 32) with one parameter struct reused.

    Args:
        function: The loaded kernel's CUfunction, as an int.
        x: The device address of 32 float32.
    """

    cdef cydriver.CUDA_KERNEL_NODE_PARAMS params
    cdef void* args[2]
    cdef uintptr_t x
    cdef int n
    cdef cydriver.CUgraph graph
    cdef cydriver.CUgraph captured

    def __init__(self, uintptr_t function, uintptr_t x):
        self.x, self.n = x, 32
        self.args[0], self.args[1] = &self.x, &self.n
        memset(&self.params, 0, sizeof(cydriver.CUDA_KERNEL_NODE_PARAMS))
        self.params.func = <cydriver.CUfunction>function
        self.params.gridDimX = self.params.gridDimY = self.params.gridDimZ = 1
        self.params.blockDimX, self.params.blockDimY, self.params.blockDimZ = 32, 1, 1
        self.params.kernelParams = self.args

    def graph_launch(self, uintptr_t exe, uintptr_t stream):
        """cuGraphLaunch."""
        check(cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream), "cuGraphLaunch")

    def launch(self, uintptr_t stream):
        """cuLaunchKernel of tiny(x, 32), one block of 32."""
        check(cydriver.cuLaunchKernel(self.params.func, 1, 1, 1, 32, 1, 1, 0, <cydriver.CUstream>stream, self.args,
                                      NULL), "cuLaunchKernel")

    def set_params(self, uintptr_t exe, uintptr_t node):
        """cuGraphExecKernelNodeSetParams of tiny(x, 32) on kernel node ``node``."""
        check(cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>exe, <cydriver.CUgraphNode>node,
                                                      &self.params), "cuGraphExecKernelNodeSetParams")

    def new_graph(self):
        """Start the graph ``add`` adds to (the previous one is destroyed)."""
        self.destroy_graph()
        check(cydriver.cuGraphCreate(&self.graph, 0), "cuGraphCreate")

    def destroy_graph(self):
        if self.graph != NULL:
            cydriver.cuGraphDestroy(self.graph)
            self.graph = NULL

    def add(self, Node after):
        """cuGraphAddKernelNode of tiny(x, 32) after ``after`` (None: no dependency); the new Node."""
        cdef cydriver.CUgraphNode added = NULL
        cdef cydriver.CUgraphNode dep = NULL
        if after is not None:
            dep = <cydriver.CUgraphNode>after.raw
        check(cydriver.cuGraphAddKernelNode(&added, self.graph, &dep, 0 if dep == NULL else 1, &self.params),
              "cuGraphAddKernelNode")
        return Node(<uintptr_t>added)

    def begin_capture(self, uintptr_t stream):
        check(cydriver.cuStreamBeginCapture(<cydriver.CUstream>stream, cydriver.CU_STREAM_CAPTURE_MODE_GLOBAL),
              "cuStreamBeginCapture")

    def end_capture(self, uintptr_t stream):
        """End the capture; its graph is kept until ``destroy_captured`` (destroyed untimed)."""
        self.destroy_captured()
        check(cydriver.cuStreamEndCapture(<cydriver.CUstream>stream, &self.captured), "cuStreamEndCapture")

    def destroy_captured(self):
        if self.captured != NULL:
            cydriver.cuGraphDestroy(self.captured)
            self.captured = NULL

    def __dealloc__(self):
        if self.graph != NULL:
            cydriver.cuGraphDestroy(self.graph)
        if self.captured != NULL:
            cydriver.cuGraphDestroy(self.captured)
