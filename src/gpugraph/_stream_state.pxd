# The C fields of _stream_state.StreamState, compiled (plain: the same names as slots). Public: Stream sets and
# reads them from Python.
from libc.stdint cimport uintptr_t

from gpugraph.backends._hot cimport HotCalls

cdef class StreamState:
    cdef public object device
    cdef public object non_blocking
    cdef public object priority
    cdef public object legacy
    cdef public object _backend
    cdef public object _handle
    cdef public object _capture
    cdef public object _number
    cdef public HotCalls _hot
    cdef public uintptr_t _hot_address
    cdef object __weakref__
