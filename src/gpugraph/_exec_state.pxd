# The C fields of _exec_state's classes, compiled (plain: the same names as slots). Public: GraphExec sets and reads
# them from Python.
from libc.stdint cimport uintptr_t

from gpugraph._argpack cimport Slots
from gpugraph._stream_state cimport StreamState
from gpugraph.backends._hot cimport HotCalls

cdef class KernelPatch:
    cdef HotCalls _hot
    cdef Slots _slots
    cdef list _params
    cdef uintptr_t _graph_exec, _context, _node, _function
    cdef tuple _grid, _block
    cdef unsigned int _shared_mem
    cdef object _use, _fail
    cdef int _set(self) except? -1

cdef class TurnLock:
    cdef object _lock
    cdef public int gate
    cpdef bint acquire(self, bint blocking=*) except -1
    cpdef int release(self) except -1

cdef class ExecState:
    cdef public object graph
    cdef public object _graph_type
    cdef public object device
    cdef public object _backend
    cdef public object _handle
    cdef public object _launch
    cdef public object _finalizer
    cdef public object _layout
    cdef public object _handles
    cdef public object _numbering
    cdef public object _indices
    cdef public object _params
    cdef public object _changed
    cdef public object _disabled
    cdef public object _gone
    cdef public object _source
    cdef public object _source_version
    cdef public object _shape
    cdef public list _recorded_events
    cdef public TurnLock _lock  # (compiled, turn_lock gives a TurnLock)
    cdef public object _flags
    cdef public object _arguments
    cdef public bint _stale_for_kernels
    cdef public HotCalls _hot
    cdef public uintptr_t _hot_address
    cdef public uintptr_t _hot_set
    cdef public uintptr_t _hot_context
    cdef bint _set_arguments(self, object node, tuple args) except -1
    cdef object __weakref__
