# The C declarations of _argpack, compiled (plain: the .py alone).
cimport cython

cdef class Slots:
    cdef readonly Py_ssize_t count
    cdef bytearray _data
    cdef object _pointers
    cdef size_t _address
    cpdef bint put(self, Py_ssize_t index, int code, object value) except -1
    @cython.locals(count=Py_ssize_t, i=Py_ssize_t)
    cpdef Py_ssize_t fill(self, bytes codes, tuple args) except -2

cdef double _HALF_MAX, _FLOAT_MAX, _DOUBLE_MAX

cdef bint _put(bytearray data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(whole=cython.longlong, low=cython.longlong, high=cython.longlong, size=cython.int)
cdef bint _put_int(bytearray data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(real=cython.double)
cdef bint _put_real(bytearray data, Py_ssize_t offset, int code, object value) except -1

cdef bint _put_scalar(bytearray data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(real=cython.double)
cdef int _store_double(bytearray data, Py_ssize_t offset, object value) except -1

@cython.locals(real=cython.float)
cdef int _store_float(bytearray data, Py_ssize_t offset, double value) except -1

cdef int _store_bytes(bytearray data, Py_ssize_t offset, bytes value) except -1

@cython.locals(natural=cython.ulonglong)
cdef int _store_natural(bytearray data, Py_ssize_t offset, object value) except -1

cdef int _store_whole(bytearray data, Py_ssize_t offset, long long whole, int size, int code) except -1
