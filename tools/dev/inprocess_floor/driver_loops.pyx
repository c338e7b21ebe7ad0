# cython: language_level=3
"""The driver calls of gpugraph's CUDA host-side figures, looped and timed in C inside a Python process: the floor
any compiled path reaches there (tools/dev/inprocess_floor/measure.py). Not part of gpugraph."""
from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from libc.time cimport timespec
from cuda.bindings cimport cydriver

cdef extern from "<time.h>" nogil:
    int clock_gettime(int clk, timespec* ts)
    int CLOCK_MONOTONIC


cdef int check(cydriver.CUresult err, str call) except -1:
    """Raise on a driver error (these loops time calls that must succeed)."""
    if err != cydriver.CUDA_SUCCESS:
        raise RuntimeError(f"driver_loops: {call} failed with CUresult {<int>err}")
    return 0


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
    cdef int i
    cdef cydriver.CUresult err
    cdef char* other = <char*>malloc(touch) if touch else NULL
    if touch and other == NULL:
        raise MemoryError(f"driver_loops: no {touch} bytes to write")
    try:
        for i in range(n):
            if touch:
                memset(other, i & 0xff, touch)
            t0 = now_us()
            err = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)
            out.append(now_us() - t0)
            check(err, "cuGraphLaunch")
            check(cydriver.cuStreamSynchronize(<cydriver.CUstream>stream), "cuStreamSynchronize")
    finally:
        free(other)
    return out


def graph_launch_once(uintptr_t exe, uintptr_t stream):
    """One cuGraphLaunch, timed in C (µs): for a loop in Python, interleaved with the other layers."""
    cdef double t0 = now_us()
    cdef cydriver.CUresult err = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)
    cdef double t = now_us() - t0
    check(err, "cuGraphLaunch")
    return t


def launch_after_reads(exe, stream, uintptr_t raw_exe, uintptr_t raw_stream, bint lock):
    """One cuGraphLaunch (GIL released) after the attribute reads the compiled core (_exec_state.ExecState.launch)
    makes, and, if ``lock``, inside the exec's lock taken and released as a launch with Params to patch takes it:
    the core's layers one at a time."""
    cdef cydriver.CUresult err
    hot, address, capture = stream._hot, stream._hot_address, stream._capture
    if lock:
        taken = exe._lock
        if not taken.acquire(False):
            raise RuntimeError("driver_loops: the exec's lock is taken")
    try:
        events, handle, pending = exe._recorded_events, exe._handle, exe._params.pending
        with nogil:
            err = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>raw_exe, <cydriver.CUstream>raw_stream)
        check(err, "cuGraphLaunch")
    finally:
        if lock:
            taken.release()


def sync(uintptr_t stream):
    """cuStreamSynchronize."""
    check(cydriver.cuStreamSynchronize(<cydriver.CUstream>stream), "cuStreamSynchronize")


def instantiate(uintptr_t graph):
    """cuGraphInstantiate's µs (the exec destroyed after the timing)."""
    cdef cydriver.CUgraphExec made = NULL
    cdef double t0 = now_us()
    cdef cydriver.CUresult err = cydriver.cuGraphInstantiate(&made, <cydriver.CUgraph>graph, 0)
    cdef double t = now_us() - t0
    check(err, "cuGraphInstantiate")
    check(cydriver.cuGraphExecDestroy(made), "cuGraphExecDestroy")
    return t


def build(uintptr_t function, uintptr_t x, int nodes):
    """µs per node of a chain of tiny(x, 32) kernel nodes added one by one, one parameter struct reused."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUDA_KERNEL_NODE_PARAMS p
    tiny_params(&p, function, args)
    cdef cydriver.CUgraph g = NULL
    check(cydriver.cuGraphCreate(&g, 0), "cuGraphCreate")
    cdef cydriver.CUgraphNode last = NULL
    cdef cydriver.CUgraphNode node = NULL
    cdef cydriver.CUresult err = cydriver.CUDA_SUCCESS
    cdef int i
    cdef double t0 = now_us()
    for i in range(nodes):
        err = cydriver.cuGraphAddKernelNode(&node, g, &last if last != NULL else NULL, 1 if last != NULL else 0, &p)
        if err != cydriver.CUDA_SUCCESS:
            break
        last = node
    cdef double t = (now_us() - t0) / nodes
    cydriver.cuGraphDestroy(g)
    check(err, "cuGraphAddKernelNode")
    return t


def capture(uintptr_t function, uintptr_t x, uintptr_t stream, int nodes):
    """µs per node of a capture of ``nodes`` tiny(x, 32) launches (begin to end)."""
    cdef int n = 32
    cdef void* args[2]
    args[0] = &x; args[1] = &n
    cdef cydriver.CUgraph g = NULL
    cdef cydriver.CUresult err = cydriver.CUDA_SUCCESS
    cdef int i
    cdef double t0 = now_us()
    check(cydriver.cuStreamBeginCapture(<cydriver.CUstream>stream, cydriver.CU_STREAM_CAPTURE_MODE_GLOBAL),
          "cuStreamBeginCapture")
    for i in range(nodes):
        err = cydriver.cuLaunchKernel(<cydriver.CUfunction>function, 1, 1, 1, 32, 1, 1, 0,
                                      <cydriver.CUstream>stream, args, NULL)
        if err != cydriver.CUDA_SUCCESS:
            break
    cdef cydriver.CUresult ended = cydriver.cuStreamEndCapture(<cydriver.CUstream>stream, &g)
    cdef double t = (now_us() - t0) / nodes
    if g != NULL:
        cydriver.cuGraphDestroy(g)
    check(err, "cuLaunchKernel")
    check(ended, "cuStreamEndCapture")
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
    cdef int i
    cdef cydriver.CUresult err
    for i in range(n_calls):
        t0 = now_us()
        err = cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>exe, <cydriver.CUgraphNode>node, &p)
        out.append(now_us() - t0)
        check(err, "cuGraphExecKernelNodeSetParams")
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
    cdef int i, j
    cdef cydriver.CUresult err = cydriver.CUDA_SUCCESS
    for j in range(count):
        handles[j] = nodes[j]
    cdef double t0 = now_us()
    for i in range(iterations):
        for j in range(count):
            err = cydriver.cuGraphExecKernelNodeSetParams(<cydriver.CUgraphExec>exe,
                                                          <cydriver.CUgraphNode>handles[j], &p)
            if err != cydriver.CUDA_SUCCESS:
                break
        if err == cydriver.CUDA_SUCCESS:
            err = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>exe, <cydriver.CUstream>stream)
        if err != cydriver.CUDA_SUCCESS:
            break
    check(err, "cuGraphExecKernelNodeSetParams / cuGraphLaunch")
    check(cydriver.cuStreamSynchronize(<cydriver.CUstream>stream), "cuStreamSynchronize")
    return (now_us() - t0) / iterations
