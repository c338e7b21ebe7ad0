# The C signatures of _hot.HotCalls' calls, compiled: addresses as uintptr_t, the driver's result as an int.
from libc.stdint cimport uintptr_t

cdef class HotCalls:
    cpdef int graph_launch(self, uintptr_t graph_exec, uintptr_t stream) except? -1
