# cython: language_level=3
"""The driver calls of the issue-13 figures, looped and timed in C inside a Python process: the floor any
compiled path reaches there (tools/inprocess_floor/measure.py). Not part of gpugraph."""
from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from libc.time cimport timespec
from cuda.bindings cimport cydriver

cdef extern from "<time.h>" nogil:
    int clock_gettime(int clk, timespec* ts)
    int CLOCK_MONOTONIC


cdef inline double now_us() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3


cdef void tiny_params(cydriver.CUDA_KERNEL_NODE_PARAMS* p, uintptr_t function, void** args) noexcept:
    memset(p, 0, sizeof(cydriver.CUDA_KERNEL_NODE_PARAMS))
    p.func = <cydriver.CUfunction>function
    p.gridDimX = 1; p.gridDimY = 1; p.gridDimZ = 1
    p.blockDimX = 32; p.blockDimY = 1; p.blockDimZ = 1
    p.kernelParams = args


def graph_launch(uintptr_t exe, uintptr_t stream, int n, size_t touch=0):
    """Each cuGraphLaunch's µs (a sync after each); ``touch`` bytes of other memory written before each."""
    cdef list out = []
    cdef double t0
    cdef char* other = <char*>malloc(touch) if touch else NULL
    for i in range(n):
        if touch:
            memset(other, i & 0xff, touch)
        t0 = now_us()
        cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)
        out.append(now_us() - t0)
        cydriver.cuStreamSynchronize(<cydriver.CUstream>stream)
    free(other)
    return out


def graph_launch_gil(uintptr_t exe, uintptr_t stream):
    """One cuGraphLaunch, the GIL held: the thinnest call a Python caller can make."""
    return <int>cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)


def sync(uintptr_t stream):
    cydriver.cuStreamSynchronize(<cydriver.CUstream>stream)


def instantiate(uintptr_t graph):
    """cuGraphInstantiate's µs (the exec destroyed after the timing)."""
    cdef cydriver.CUgraphExec made
    cdef double t0 = now_us()
    cydriver.cuGraphInstantiate(&made, <cydriver.CUgraph>graph, 0)
    cdef double t = now_us() - t0
    cydriver.cuGraphExecDestroy(made)
    return t


def build(uintptr_t function, uintptr_t x, int nodes):
    """µs per node of a chain of tiny(x, 32) kernel nodes added one by one, one parameter struct reused."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
    tiny_params(&p, function, args)
    cdef cydriver.CUgraph g
    cydriver.cuGraphCreate(&g, 0)
    cdef cydriver.CUgraphNode last = NULL, node
    cdef double t0 = now_us()
    for i in range(nodes):
        cydriver.cuGraphAddKernelNode(&node, g, &last if last != NULL else NULL, 1 if last != NULL else 0, &p)
        last = node
    cdef double t = (now_us() - t0) / nodes
    cydriver.cuGraphDestroy(g)
    return t


def capture(uintptr_t function, uintptr_t x, uintptr_t stream, int nodes):
    """µs per node of a capture of ``nodes`` tiny(x, 32) launches (begin to end)."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUgraph g
    cdef double t0 = now_us()
    cydriver.cuStreamBeginCapture(<cydriver.CUstream>stream, cydriver.CU_STREAM_CAPTURE_MODE_GLOBAL)
    for i in range(nodes):
        cydriver.cuLaunchKernel(<cydriver.CUfunction>function, 1, 1, 1, 32, 1, 1, 0, <cydriver.CUstream>stream,
                                args, NULL)
    cydriver.cuStreamEndCapture(<cydriver.CUstream>stream, &g)
    cdef double t = (now_us() - t0) / nodes
    cydriver.cuGraphDestroy(g)
    return t


def set_params(uintptr_t exe, uintptr_t node, uintptr_t function, uintptr_t x, int n_calls):
    """Each cuGraphExecKernelNodeSetParams' µs, tiny(x, 32) on ``node``."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
    tiny_params(&p, function, args)
    cdef list out = []
    cdef double t0
    for i in range(n_calls):
        t0 = now_us()
        cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>exe, <cydriver.CUgraphNode>node, &p)
        out.append(now_us() - t0)
    return out


def seed_like(uintptr_t exe, uintptr_t stream, list nodes, uintptr_t function, uintptr_t x, int iterations):
    """The combined approach's driver calls: per iteration, set the parameters of ``nodes`` (tiny(x, 32)),
    then launch; one sync at the end. µs per iteration."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
    tiny_params(&p, function, args)
    cdef uintptr_t handles[8]
    cdef int count = min(len(nodes), 8)
    for j in range(count):
        handles[j] = nodes[j]
    cdef double t0 = now_us()
    for i in range(iterations):
        for j in range(count):
            cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>exe, <cydriver.CUgraphNode>handles[j], &p)
        cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)
    cydriver.cuStreamSynchronize(<cydriver.CUstream>stream)
    return (now_us() - t0) / iterations
