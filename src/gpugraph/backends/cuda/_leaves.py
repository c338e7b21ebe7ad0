"""The CUDA driver calls of the paths users repeat (a launch, a capture's life, a whole-graph update), each written
once: compiled, through ``cuda.bindings.cydriver`` with the GIL released (a launch may wait for room in the
stream's queue, which a host function holding the GIL would free); plain, through cuda-bindings' Python calls.

Handles come in as ints (a handle's ``raw``: its value). Each call returns the driver's result as an int, with
what it made as addresses (0 for none), which the backend turns into its objects or its error; the listing of a
graph's nodes returns cuda-bindings' node handles, or the result if the driver refuses.

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython, a ``cuda.h`` and cuda-bindings
(``_leaves.pxd`` declares its C signatures), and run only with a cuda-bindings of the major version it was built
against; plain elsewhere. The HIP twin of each call is the same call through hip-python's ``chip``. ``CudaHot``
gives the compiled core the calls it makes itself (``gpugraph.backends._hot``).
"""

from __future__ import annotations

from cuda.bindings import driver as cu

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from ... import _cython as cython

if cython.compiled:
    from cython.cimports.cuda.bindings import cydriver
    from cython.cimports.gpugraph.backends._hot import HotCalls
    from cython.cimports.libc.stdint import uintptr_t
    from cython.cimports.libc.stdlib import free, malloc
    from cython.cimports.libc.string import memset
else:
    from .._hot import HotCalls
    from ._symbols import drv


def launch_kernel(function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int, block_z: int,
                  shared_mem: int, stream: int, kernel_params: int) -> int:
    """cuLaunchKernel (hipModuleLaunchKernel): ``kernel_params`` is the address of the argument pointers."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        with cython.nogil:
            err = cydriver.cuLaunchKernel(cython.cast(cydriver.CUfunction, function), grid_x, grid_y, grid_z,
                                          block_x, block_y, block_z, shared_mem,
                                          cython.cast(cydriver.CUstream, stream),
                                          cython.cast(cython.pointer(cython.p_void), kernel_params), cython.NULL)
        return err
    else:
        return int(drv.launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream,
                                     kernel_params, 0)[0])


def graph_launch(graph_exec: int, stream: int) -> int:
    """cuGraphLaunch (hipGraphLaunch)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        with cython.nogil:
            err = cydriver.cuGraphLaunch(cython.cast(cydriver.CUgraphExec, graph_exec),
                                         cython.cast(cydriver.CUstream, stream))
        return err
    else:
        return int(drv.graph_launch(graph_exec, stream)[0])


def exec_kernel_node_set(graph_exec: int, context: int, node: int, function: int, grid_x: int, grid_y: int,
                         grid_z: int, block_x: int, block_y: int, block_z: int, shared_mem: int,
                         kernel_params: int) -> int:
    """cuGraphExecKernelNodeSetParams (hipGraphExecKernelNodeSetParams): the kernel node ``node`` of the executable
    graph at ``graph_exec`` runs ``function`` with this shape and the arguments ``kernel_params`` points at; made
    only where ``context`` is this thread's current context (else CUDA_ERROR_INVALID_CONTEXT, nothing called: from a
    thread with no current context the driver crashes in this call rather than refusing it, driver 580 on the
    H200, tools/probes/gpu_probe_threads.py)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        params = cython.declare(cydriver.CUDA_KERNEL_NODE_PARAMS)
        current = cython.declare(cydriver.CUcontext, cython.NULL)
        with cython.nogil:
            err = cydriver.cuCtxGetCurrent(cython.address(current))
        if err != cydriver.CUDA_SUCCESS or cython.cast(uintptr_t, current) != context:
            return cydriver.CUDA_ERROR_INVALID_CONTEXT
        _kernel_node(cython.address(params), function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem,
                     kernel_params)
        with cython.nogil:
            err = cydriver.cuGraphExecKernelNodeSetParams(cython.cast(cydriver.CUgraphExec, graph_exec),
                                                          cython.cast(cydriver.CUgraphNode, node),
                                                          cython.address(params))
        return err
    else:
        err, current = drv.ctx_get_current()
        if err or int(current or 0) != context:
            return int(cu.CUresult.CUDA_ERROR_INVALID_CONTEXT)
        params = _kernel_node_params(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem,
                                     kernel_params)
        return int(drv.graph_exec_kernel_node_set_params(graph_exec, node, params)[0])


def _kernel_node(params: object, function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                 block_z: int, shared_mem: int, kernel_params: int) -> None:
    """Fill the CUDA_KERNEL_NODE_PARAMS at ``params`` (compiled), its fields this call does not name zero (``kern``
    and ``ctx`` of the struct's second version, which the driver ignores where ``func`` is given)."""
    if cython.compiled:
        p = cython.declare(cython.pointer(cydriver.CUDA_KERNEL_NODE_PARAMS), params)
        memset(p, 0, cython.sizeof(cydriver.CUDA_KERNEL_NODE_PARAMS))
        p.func = cython.cast(cydriver.CUfunction, function)
        p.gridDimX, p.gridDimY, p.gridDimZ = grid_x, grid_y, grid_z
        p.blockDimX, p.blockDimY, p.blockDimZ = block_x, block_y, block_z
        p.sharedMemBytes = shared_mem
        p.kernelParams = cython.cast(cython.pointer(cython.p_void), kernel_params)
        p.extra = cython.NULL


def _kernel_node_params(function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                        block_z: int, shared_mem: int, kernel_params: int) -> cu.CUDA_KERNEL_NODE_PARAMS:
    """A CUDA_KERNEL_NODE_PARAMS (plain)."""
    p = cu.CUDA_KERNEL_NODE_PARAMS()
    p.func, p.extra = cu.CUfunction(function), 0
    p.gridDimX, p.gridDimY, p.gridDimZ = grid_x, grid_y, grid_z
    p.blockDimX, p.blockDimY, p.blockDimZ = block_x, block_y, block_z
    p.sharedMemBytes, p.kernelParams = shared_mem, kernel_params
    return p


def begin_capture(stream: int, mode: int) -> int:
    """cuStreamBeginCapture (hipStreamBeginCapture)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        with cython.nogil:
            err = cydriver.cuStreamBeginCapture(cython.cast(cydriver.CUstream, stream),
                                                cython.cast(cydriver.CUstreamCaptureMode, mode))
        return err
    else:
        return int(drv.stream_begin_capture(stream, cu.CUstreamCaptureMode(mode))[0])


def capture_graph(stream: int) -> tuple[int, int]:
    """cuStreamGetCaptureInfo (hipStreamGetCaptureInfo_v2): (the result, the address of the graph ``stream``
    captures into)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        graph = cython.declare(cydriver.CUgraph, cython.NULL)
        status = cython.declare(cydriver.CUstreamCaptureStatus)
        with cython.nogil:
            err = cydriver.cuStreamGetCaptureInfo(cython.cast(cydriver.CUstream, stream), cython.address(status),
                                                  cython.NULL, cython.address(graph), cython.NULL, cython.NULL,
                                                  cython.NULL)
        return err, cython.cast(uintptr_t, graph)
    else:
        err, _, _, graph, *_ = drv.stream_get_capture_info(stream)
        return int(err), int(graph or 0)


def end_capture(stream: int) -> tuple[int, int]:
    """cuStreamEndCapture (hipStreamEndCapture): (the result, the captured graph's address, 0 if none)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        graph = cython.declare(cydriver.CUgraph, cython.NULL)
        with cython.nogil:
            err = cydriver.cuStreamEndCapture(cython.cast(cydriver.CUstream, stream), cython.address(graph))
        return err, cython.cast(uintptr_t, graph)
    else:
        err, graph = drv.stream_end_capture(stream)
        return int(err), int(graph or 0)


def exec_update(graph_exec: int, graph: int) -> tuple[int, int, int]:
    """cuGraphExecUpdate (hipGraphExecUpdate): (the result, the update's result, the address of the node the
    driver names, 0 if none)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        info = cython.declare(cydriver.CUgraphExecUpdateResultInfo)
        info.result = cydriver.CU_GRAPH_EXEC_UPDATE_SUCCESS
        info.errorNode = cython.NULL
        info.errorFromNode = cython.NULL
        with cython.nogil:
            err = cydriver.cuGraphExecUpdate(cython.cast(cydriver.CUgraphExec, graph_exec),
                                             cython.cast(cydriver.CUgraph, graph), cython.address(info))
        return err, info.result, cython.cast(uintptr_t, info.errorNode)
    else:
        err, info = drv.graph_exec_update(graph_exec, graph)
        if info is None:
            return int(err), 0, 0
        return int(err), int(info.result), int(info.errorNode or 0)


def graph_destroy(graph: int) -> int:
    """cuGraphDestroy (hipGraphDestroy)."""
    if cython.compiled:
        err = cython.declare(cydriver.CUresult)
        with cython.nogil:
            err = cydriver.cuGraphDestroy(cython.cast(cydriver.CUgraph, graph))
        return err
    else:
        return int(drv.graph_destroy(graph)[0])


def graph_nodes(graph: int) -> list[cu.CUgraphNode] | int:
    """cuGraphGetNodes (hipGraphGetNodes): the graph's nodes in creation order, as cuda-bindings' node handles, or
    the result, if the driver refuses (compiled, read in one call when they fit a first guess; plain, counted first)."""
    if cython.compiled:
        return _graph_nodes(graph)
    else:
        err, _, count = drv.graph_get_nodes(graph, 0)
        if err or not count:
            return int(err) if err else []
        err, nodes, count = drv.graph_get_nodes(graph, count)  # (fewer, if the graph shrank meanwhile)
        return int(err) if err else list(nodes)[:count]


def _graph_nodes(graph: int) -> list[cu.CUgraphNode] | int:
    """graph_nodes, compiled: a first guess of 64 nodes, then as many as the driver counts."""
    capacity = cython.declare(cython.size_t, 64)
    count = cython.declare(cython.size_t)
    counted = cython.declare(cython.size_t)
    nodes = cython.declare(cython.pointer(cydriver.CUgraphNode), cython.NULL)
    err = cython.declare(cydriver.CUresult)
    try:
        while True:
            free(nodes)
            nodes = cython.cast(cython.pointer(cydriver.CUgraphNode),
                                malloc(capacity * cython.sizeof(cydriver.CUgraphNode)))
            if nodes == cython.NULL:
                raise MemoryError()
            count = capacity
            with cython.nogil:
                err = cydriver.cuGraphGetNodes(cython.cast(cydriver.CUgraph, graph), nodes, cython.address(count))
            if err != cydriver.CUDA_SUCCESS:
                return err
            if count < capacity:  # (fewer than there is room for: all of them; else there may be more)
                break
            with cython.nogil:
                err = cydriver.cuGraphGetNodes(cython.cast(cydriver.CUgraph, graph), cython.NULL,
                                               cython.address(counted))
            if err != cydriver.CUDA_SUCCESS:
                return err
            if counted <= capacity:  # (exactly as many: all of them; fewer: the graph shrank, listed once more)
                count = counted
                if counted < capacity:
                    with cython.nogil:
                        err = cydriver.cuGraphGetNodes(cython.cast(cydriver.CUgraph, graph), nodes,
                                                       cython.address(count))
                    if err != cydriver.CUDA_SUCCESS:
                        return err
                break
            capacity = counted + 1
        return [cu.CUgraphNode(cython.cast(uintptr_t, nodes[i])) for i in range(count)]
    finally:
        free(nodes)


_CAPTURE_ENDED = 901  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: a captured launch not made, the capture no longer records


@cython.cclass
class CudaHot(HotCalls):
    """The CUDA backend's hot calls (``gpugraph.backends._hot``): the leaves above, called from C when compiled."""

    def graph_address(self, exec_: object) -> int:
        # (A graph with graph memory or host nodes launches through the backend, which notes and routes them.)
        if exec_.memory is not None or exec_.host_keys:  # type: ignore[attr-defined]
            return 0
        return exec_.raw  # type: ignore[attr-defined]

    def graph_launch(self, graph_exec: int, stream: int) -> int:
        return graph_launch(graph_exec, stream)

    def launch_kernel(self, function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                      block_z: int, shared_mem: int, stream: int, kernel_params: int) -> int:
        return launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream,
                             kernel_params)

    def captured_launch(self, capture: object, record: object, function: int, grid_x: int, grid_y: int, grid_z: int,
                        block_x: int, block_y: int, block_z: int, shared_mem: int, stream: int,
                        kernel_params: int) -> int:
        lock = capture.lock  # type: ignore[attr-defined]  # (a CudaCapture's: held from the launch to the queueing)
        if lock is None:
            return _CAPTURE_ENDED
        with lock:
            if not capture.active:  # type: ignore[attr-defined]  # (ended on another thread)
                return _CAPTURE_ENDED
            err = launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream,
                                kernel_params)
            if err == 0:
                capture.graph.pending.append((record, None))  # type: ignore[attr-defined]
        return err

    def node_setter(self, exec_: object) -> tuple[int, int]:
        # (A graph kernels launch is uploaded again after each change, which the backend's exec_set_node does.)
        if exec_.device_launch:  # type: ignore[attr-defined]
            return 0, 0
        return exec_.raw, exec_.context  # type: ignore[attr-defined]

    def node_address(self, node: object) -> int:
        return int(node)  # type: ignore[call-overload]  # (a CUgraphNode: its value)

    def exec_kernel_node_set(self, graph_exec: int, context: int, node: int, function: int, grid_x: int,
                             grid_y: int, grid_z: int, block_x: int, block_y: int, block_z: int, shared_mem: int,
                             kernel_params: int) -> int:
        return exec_kernel_node_set(graph_exec, context, node, function, grid_x, grid_y, grid_z, block_x, block_y,
                                    block_z, shared_mem, kernel_params)
