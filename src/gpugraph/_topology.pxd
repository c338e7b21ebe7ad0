# The C fields of _topology.Topology, compiled (plain: the same names as slots). Public: the graph reads and sets
# them from Python, and the classmethods reach a new Topology's fields through Python objects.
cdef class Topology:
    cdef public list handles
    cdef public dict _position
    cdef public list records
    cdef public dict renamed
    cdef public Py_ssize_t numbered
    cdef public list _deps
    cdef public dict allocs
    cdef public dict children
    cdef public bint memory
    cdef public tuple _shape
    cdef public tuple _nested
    cdef public tuple _recorded
    cdef public tuple unread
