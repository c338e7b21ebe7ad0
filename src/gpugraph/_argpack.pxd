# The C declarations of _argpack, compiled (plain: the .py alone).
cimport cython

from libc.stdint cimport uintptr_t

cdef class Layout:
    cdef readonly bytes codes
    cdef readonly tuple wants
    cdef readonly uintptr_t function

cdef class Slots:
    cdef readonly Py_ssize_t count
    cdef bytearray _data
    cdef object _pointers
    cdef size_t _address
    cpdef bint put(self, Py_ssize_t index, int code, object value) except -1
    @cython.locals(count=Py_ssize_t, i=Py_ssize_t)
    cpdef Py_ssize_t fill(self, bytes codes, tuple args) except -2
    cpdef Py_ssize_t fill_common(self, bytes codes, tuple wants, object device, tuple args, list typed=*) except -2

cdef double _HALF_MAX, _FLOAT_MAX, _DOUBLE_MAX

cdef bint put_slot(char* data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(whole=cython.longlong, low=cython.longlong, high=cython.longlong, size=cython.int)
cdef bint _put_int(char* data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(real=cython.double)
cdef bint _put_real(char* data, Py_ssize_t offset, int code, object value) except -1

cdef bint _put_scalar(char* data, Py_ssize_t offset, int code, object value) except -1

@cython.locals(real=cython.double)
cdef int _store_double(char* data, Py_ssize_t offset, object value) except -1

@cython.locals(real=cython.float)
cdef int _store_float(char* data, Py_ssize_t offset, double value) except -1

cdef int _store_bytes(char* data, Py_ssize_t offset, bytes value) except -1

@cython.locals(natural=cython.ulonglong)
cdef int _store_natural(char* data, Py_ssize_t offset, object value) except -1

cdef int _store_whole(char* data, Py_ssize_t offset, long long whole, int size, int code) except -1

cdef char* _base(bytearray data)

@cython.locals(count=Py_ssize_t, i=Py_ssize_t, code=int)
cdef Py_ssize_t write_common(bytes codes, tuple wants, object device, tuple args, char* data, list typed) except -2

cdef dict _typed_ints
cpdef object typed_number(object want, object value)
