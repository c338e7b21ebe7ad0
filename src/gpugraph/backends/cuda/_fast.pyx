# cython: language_level=3, boundscheck=False, wraparound=False
"""gpugraph's compiled CUDA lanes left beside the compiled core: the common cases of ``add_kernel``, reading a
graph's edges and checking its shape, made through ``cuda.bindings.cydriver`` (as cuda.core makes them) instead of
cuda-bindings' Python wrappers. (A launch, a graph launch, ``set_params`` and a Param patch are the core's:
``gpugraph._stream_state``, ``gpugraph._exec_state``; the plain driver calls of those paths are ``_leaves``'.)

Handles come in as ints (``int()`` of a cuda-bindings handle object is its value); the lanes return True, the new
object, or None/False to leave the call to the Python path. The GIL is released around each driver call: a launch
may wait for room in the stream's queue, which a host function holding the GIL would free. The HIP twin of each
call is the same call through hip-python's ``chip`` declarations.
"""

from libc.stdint cimport uint64_t, uintptr_t
from cuda.bindings cimport cydriver


# Arguments are written by gpugraph._argpack (the one packer, its compiled C functions): a kernel whose signature
# types every slot has its Layout (Function.layout: one code per slot and what each wants); only the
# common cases are taken (``_argpack.write_common``): anything else declines, nothing is launched, and the caller
# takes the Python path, which converts or explains the argument as it always has.

from gpugraph._argpack cimport Layout, write_common

cdef object _array_type = None
cdef object _kernel_params_type = None
cdef object _node_type = None
cdef object _node_handle_type = None  # cuda-bindings' CUgraphNode, the handle type the backend's nodes have
cdef object _host_threads = None  # the front end's HOST_THREADS set (empty unless a host function runs)
# KernelParams (a NamedTuple) made without its Python __new__, as tuple.__new__(KernelParams, fields): a fifth
# of the cost, on the paths that make one per call.
cdef object _tuple_new = tuple.__new__

def set_types(array, kernel_params, node, node_handle, host_threads):
    """The front end's Array, KernelParams and Node classes, cuda-bindings' CUgraphNode, and the front end's
    HOST_THREADS set (backends sit below the front end, so they are handed in once)."""
    global _array_type, _kernel_params_type, _node_type, _node_handle_type, _host_threads
    _array_type, _kernel_params_type, _node_type = array, kernel_params, node
    _node_handle_type, _host_threads = node_handle, host_threads


cdef enum:
    MAX_SLOTS = 32  # (a kernel with more parameters takes the Python path)


# What a node's record keeps, made with few new objects: these paths make one record per call, and each new
# object costs more between driver calls than alone (measured on the H200, 2026-11-23: three small objects per
# node tripled a C loop's cost per node). NumPy scalars and tuples never change, so equal ones are shared.

cdef enum:
    SHARED_MAX = 1024  # values kept per table (beyond them, new objects are made)

cdef dict _dims = {}  # n -> (n, 1, 1)


cdef object _dim3(object n):
    """``(n, 1, 1)``, shared."""
    dims = _dims.get(n)
    if dims is None:
        dims = (n, 1, 1)
        if len(_dims) < SHARED_MAX:
            _dims[n] = dims
    return dims


cdef Py_ssize_t _write_args(function, object device, tuple args, uint64_t* slots, void** pointers,
                            list typed=None) except -2:
    """Write ``args`` for ``function`` (the backend's Function) into ``slots`` and point ``pointers`` at them:
    the slot count, or -1 to decline (``_argpack.write_common``, which fills ``typed``, if given, with the
    arguments as graph nodes keep them)."""
    cdef Py_ssize_t count, i
    layout = function.layout
    if type(layout) is not Layout or len(args) > MAX_SLOTS:
        return -1
    count = write_common((<Layout>layout).codes, (<Layout>layout).wants, device, args, <char*>slots, typed)
    for i in range(count):
        pointers[i] = &slots[i]
    return count


cdef inline bint _one_d(grid, block):
    return type(grid) is int and type(block) is int and 1 <= grid <= 2147483647 and 1 <= block <= 1024


cdef inline bint _in_context(uintptr_t context) noexcept nogil:
    """Whether ``context`` is this thread's current context."""
    cdef cydriver.CUcontext current = NULL
    return cydriver.cuCtxGetCurrent(&current) == cydriver.CUDA_SUCCESS and <uintptr_t>current == context


cdef class Builder:
    """The compiled lane of one graph's ``Graph.add_kernel``: a 1-D kernel node after one Node of the graph or
    none, with arguments ``pack`` takes, added (cuGraphAddKernelNode; hipGraphAddKernelNode) and noted in the
    graph's Topology as the Python path notes it. ``add_kernel`` returns the new Node, or None, having added
    nothing, for anything else; the Python path then adds the node or explains why not.

    It reads the front end's Graph fields (``_lock``, ``_topology``, ``_stale``, ``_watchers``, ``_owner``,
    ``_recording``), and changes the graph as ``Graph._add`` does: under its lock, the version counted, the
    graph marked unread while the backend holds a node the Topology has not noted (an interrupt there leaves
    it to be read again), then ``Graph._adopt``. A lane that finds the lock taken declines, as does one called
    from a thread whose current context is not the graph's. A driver error is raised through ``on_error(call,
    code)``, as the Python path raises it, with nothing added.
    """

    cdef uintptr_t graph, context
    cdef object device, device_index, backend_graph, on_error

    def __init__(self, uintptr_t graph, uintptr_t context, device, backend_graph, on_error):
        self.graph, self.context, self.device, self.backend_graph = graph, context, device, backend_graph
        self.device_index, self.on_error = device.index, on_error

    def add_kernel(self, graph, kernel, grid, block, tuple args, after):
        cdef uint64_t slots[MAX_SLOTS]
        cdef void* pointers[MAX_SLOTS]
        cdef cydriver.CUDA_KERNEL_NODE_PARAMS params
        cdef cydriver.CUgraphNode dep = NULL
        cdef cydriver.CUgraphNode added = NULL
        cdef size_t count = 0
        cdef Py_ssize_t position
        cdef cydriver.CUresult err
        if (_host_threads or not _one_d(grid, block) or self.backend_graph.before is not None
                or not _in_context(self.context)):
            return None
        if type(after) is _node_type:
            if after.graph is not graph:
                return None
            count = 1
        elif not (after is None or (type(after) is tuple and not after)):
            return None
        function = kernel._functions.get(self.device)
        if function is None:
            return None
        lock = graph._lock
        if not lock.acquire(False):
            return None
        try:
            topology = graph._topology
            if (graph._stale or graph._watchers or topology.unread is not None or graph._owner is not None
                    or graph._recording):
                return None
            positions = []
            if count:
                # (As Graph._locate: a Node's position holds its very handle object unless the graph was read
                # since; otherwise the Python path finds it.)
                position = after._i
                handles = topology.handles
                if position >= len(handles) or handles[position] is not after._handle:
                    return None
                positions.append(position)
                dep = <cydriver.CUgraphNode><uintptr_t>int(after._handle)
            typed = []
            if _write_args(function, self.device, args, slots, pointers, typed) < 0:
                return None
            params.func = <cydriver.CUfunction><uintptr_t>function.raw
            params.gridDimX, params.gridDimY, params.gridDimZ = grid, 1, 1
            params.blockDimX, params.blockDimY, params.blockDimZ = block, 1, 1
            params.sharedMemBytes = 0
            params.kernelParams = pointers
            params.extra = params.kern = params.ctx = NULL  # (kern, ctx: the driver ignores them where func is given)
            record = _tuple_new(_kernel_params_type, (kernel, _dim3(grid), _dim3(block), 0, tuple(typed),
                                                      self.device_index))
            graph._version += 1
            graph._stale = True
            with nogil:
                err = cydriver.cuGraphAddKernelNode(&added, <cydriver.CUgraph>self.graph, &dep, count, &params)
            if err != cydriver.CUDA_SUCCESS:
                graph._stale = False  # (nothing was added)
                self.on_error("cuGraphAddKernelNode", <int>err)
            node = graph._adopt(_node_handle_type(<uintptr_t>added), record, positions)
            graph._stale = False
            return node
        finally:
            lock.release()


# Reading a graph's edges (Topology.read_edges' compiled lane): cuGraphGetEdges (hipGraphGetEdges) into C arrays,
# each end found among the nodes the Topology lists in a hash table of their addresses (open addressing).

from libc.stdlib cimport malloc, calloc, free

cdef struct _Place:
    uintptr_t node  # (0: an empty slot; no node has address 0)
    Py_ssize_t position


cdef inline size_t _slot(uintptr_t node, size_t mask) noexcept nogil:
    """The first slot to look in for ``node`` in a table of ``mask + 1`` slots (a power of two, under 2**32)."""
    # (Multiplicative hashing: addresses share their low bits, the multiply by 2**64 / golden ratio spreads them
    # into bits 32 and up, which the mask then takes.)
    return <size_t>((<uint64_t>node * <uint64_t>0x9E3779B97F4A7C15) >> 32) & mask


cdef inline Py_ssize_t _find(_Place* table, size_t mask, uintptr_t node) noexcept nogil:
    """The position of ``node`` in the table, or -1 if the nodes listed do not include it (the table is at most
    half full, so the probe always meets an empty slot)."""
    cdef size_t k
    if node == 0:
        return -1
    k = _slot(node, mask)
    while table[k].node != 0:
        if table[k].node == node:
            return table[k].position
        k = (k + 1) & mask
    return -1


cdef _Place* _new_table(Py_ssize_t count, size_t* mask) noexcept nogil:
    """An empty table for ``count`` nodes (at most half full), its size less one in ``mask``; NULL if out of
    memory."""
    cdef size_t size = 16
    while size < 2 * <size_t>count:
        size <<= 1
    mask[0] = size - 1
    return <_Place*>calloc(size, sizeof(_Place))


cdef inline void _place(_Place* table, size_t mask, uintptr_t node, Py_ssize_t position) noexcept nogil:
    """Note that ``node`` is at ``position``."""
    cdef size_t k = _slot(node, mask)
    while table[k].node != 0:
        k = (k + 1) & mask
    table[k].node = node
    table[k].position = position


cdef int _read_edges(uintptr_t graph, cydriver.CUgraphNode** ends, size_t* edges, size_t* capacity,
                     cydriver.CUresult* err) except -1:
    """The graph's edges into ``ends[0]`` (sources, then targets from ``capacity[0]`` on) and their count into
    ``edges``, in one call when ``capacity`` (a guess, raised when too small) holds them all; ``err`` is the
    driver's answer."""
    cdef cydriver.CUgraphEdgeData* data = NULL
    cdef size_t counted = 0
    cdef bint lossy = False  # (some edge carries data: asked with it from then on)
    while True:
        free(ends[0])
        ends[0] = <cydriver.CUgraphNode*>malloc(2 * capacity[0] * sizeof(cydriver.CUgraphNode))
        if ends[0] == NULL:
            raise MemoryError()
        if not lossy:
            edges[0] = capacity[0]
            with nogil:
                # (Without edge data first, as edges mostly have none; asked again with it when some have, as a
                # query without it then fails.)
                err[0] = cydriver.cuGraphGetEdges(<cydriver.CUgraph>graph, ends[0], ends[0] + capacity[0], NULL,
                                                  edges)
            lossy = err[0] == cydriver.CUDA_ERROR_LOSSY_QUERY
        if lossy:
            data = <cydriver.CUgraphEdgeData*>malloc(capacity[0] * sizeof(cydriver.CUgraphEdgeData))
            if data == NULL:
                raise MemoryError()
            edges[0] = capacity[0]
            with nogil:
                err[0] = cydriver.cuGraphGetEdges(<cydriver.CUgraph>graph, ends[0], ends[0] + capacity[0], data,
                                                  edges)
            free(data)
        if err[0] != cydriver.CUDA_SUCCESS or edges[0] < capacity[0]:  # (fewer than there is room for: all)
            return 0
        # As many as there is room for: there may be more. Counted, then read again if so.
        with nogil:
            err[0] = cydriver.cuGraphGetEdges(<cydriver.CUgraph>graph, NULL, NULL, NULL, &counted)
        if err[0] != cydriver.CUDA_SUCCESS or counted <= capacity[0]:
            if edges[0] > capacity[0]:  # (a count, not what was written: the graph shrank between the calls)
                edges[0] = capacity[0]
            return 0
        capacity[0] = counted + 1


def graph_dependencies(uintptr_t graph, list handles not None):
    """``Topology._dependencies`` (which says what it returns) for the nodes ``handles`` lists, cuda-bindings'
    CUgraphNode objects, from the driver's edges in the driver's order. None if the driver refuses a call: the
    Python path then reads the edges and explains the error."""
    cdef Py_ssize_t count = len(handles), i, j, e
    cdef size_t edges = 0, mask, capacity
    cdef cydriver.CUgraphNode* targets
    cdef _Place* table = NULL
    cdef cydriver.CUgraphNode* ends = NULL
    cdef Py_ssize_t* first = NULL
    cdef cydriver.CUresult err
    cdef dict several = {}
    cdef list deps = [()] * count
    if count == 0:
        return deps, False
    try:
        table = _new_table(count, &mask)
        first = <Py_ssize_t*>malloc(count * sizeof(Py_ssize_t))
        if table == NULL or first == NULL:
            raise MemoryError()
        for i in range(count):
            _place(table, mask, <uintptr_t>int(handles[i]), i)
            first[i] = -1
        # (Room for one more edge than nodes: a chain has one fewer, so most graphs are read in one call.)
        capacity = <size_t>count + 1
        _read_edges(graph, &ends, &edges, &capacity, &err)
        if err != cydriver.CUDA_SUCCESS:
            return None
        targets = ends + capacity
        for e in range(<Py_ssize_t>edges):
            i = _find(table, mask, <uintptr_t>targets[e])
            j = _find(table, mask, <uintptr_t>ends[e])
            if i < 0 or j < 0:
                continue
            if first[i] < 0:
                first[i] = j
                deps[i] = j
            elif i in several:
                (<list>several[i]).append(j)
            else:
                several[i] = [first[i], j]
        for i, listed in several.items():
            deps[i] = tuple(listed)
        return deps, bool(several)
    finally:
        free(table)
        free(first)
        free(ends)


# Comparing a graph's edges with a shape (Topology.has_shape's compiled lane): an update compares a recaptured
# graph's topology with its executable graph's, and when they are equal never needs the new graph's edges as
# Python objects.

from libc.stdlib cimport qsort


cdef int _by_position(const void* a, const void* b) noexcept nogil:
    cdef Py_ssize_t x = (<const Py_ssize_t*>a)[0], y = (<const Py_ssize_t*>b)[0]
    return (x > y) - (x < y)


def graph_has_shape(uintptr_t graph, Py_ssize_t count, tuple shape not None):
    """``Topology.has_shape`` (which says what it answers) for a graph of ``count`` nodes: the driver's listing
    of its nodes (their creation order, the Topology's positions) and its edges compared in C with ``shape``,
    which gives per node the position of its one dependency (an int), else their sorted positions (a tuple).
    None if the driver refuses a call, lists another number of nodes or an edge end it did not list, or
    ``shape`` holds something else (a one-element tuple, a position that is not an int): the front end then
    compares as ``shape()`` does."""
    cdef size_t listed, edges = 0, mask, capacity
    cdef Py_ssize_t i, j, e, n, total = 0
    cdef cydriver.CUgraphNode* nodes = NULL
    cdef cydriver.CUgraphNode* ends = NULL
    cdef cydriver.CUgraphNode* targets
    cdef _Place* table = NULL
    cdef Py_ssize_t* start = NULL  # node i's dependencies are got[start[i]:start[i + 1]]
    cdef Py_ssize_t* got = NULL
    cdef Py_ssize_t* filled = NULL  # how many of node i's were found so far
    cdef cydriver.CUresult err
    if len(shape) != count:
        return False
    try:
        nodes = <cydriver.CUgraphNode*>malloc((count + 1) * sizeof(cydriver.CUgraphNode))
        table = _new_table(count, &mask)
        start = <Py_ssize_t*>malloc((count + 1) * sizeof(Py_ssize_t))
        filled = <Py_ssize_t*>calloc(count + 1, sizeof(Py_ssize_t))
        if nodes == NULL or table == NULL or start == NULL or filled == NULL:
            raise MemoryError()
        for i in range(count):
            start[i] = total
            d = shape[i]
            if type(d) is int:
                total += 1
            elif type(d) is tuple and len(<tuple>d) != 1:  # (shape() gives one dependency as an int)
                for x in <tuple>d:
                    if type(x) is not int:
                        return None
                total += len(<tuple>d)
            else:
                return None
        start[count] = total
        got = <Py_ssize_t*>malloc((total + 1) * sizeof(Py_ssize_t))
        if got == NULL:
            raise MemoryError()
        # (Room for one more: a graph with more nodes than the Topology lists answers count + 1.)
        listed = <size_t>count + 1
        with nogil:
            err = cydriver.cuGraphGetNodes(<cydriver.CUgraph>graph, nodes, &listed)
        if err != cydriver.CUDA_SUCCESS or listed != <size_t>count:
            return None
        for i in range(count):
            _place(table, mask, <uintptr_t>nodes[i], i)
        capacity = <size_t>count + 1
        _read_edges(graph, &ends, &edges, &capacity, &err)
        if err != cydriver.CUDA_SUCCESS:
            return None
        targets = ends + capacity
        for e in range(<Py_ssize_t>edges):
            i = _find(table, mask, <uintptr_t>targets[e])
            j = _find(table, mask, <uintptr_t>ends[e])
            if i < 0 or j < 0:
                return None
            if start[i] + filled[i] >= start[i + 1]:  # (more dependencies than the shape gives)
                return False
            got[start[i] + filled[i]] = j
            filled[i] += 1
        for i in range(count):
            n = start[i + 1] - start[i]
            if filled[i] != n:
                return False
            d = shape[i]
            if type(d) is int:
                if got[start[i]] != <Py_ssize_t>d:
                    return False
                continue
            if n > 1:
                qsort(&got[start[i]], n, sizeof(Py_ssize_t), _by_position)
            for j in range(n):
                if got[start[i] + j] != <Py_ssize_t>(<tuple>d)[j]:
                    return False
        return True
    finally:
        free(nodes)
        free(table)
        free(start)
        free(got)
        free(filled)
        free(ends)
