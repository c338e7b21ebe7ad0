"""The signature reader: pointer depth, typedefs, macros, comments, literals and templates, read as the
compiler reads them or left unknown (never a wrong type); the check of a signature against the compiled
kernel's parameters (fake driver answers here, a real refusal on a GPU); pointer-to-pointer arguments."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import gpugraph as gg
from gpugraph._signature import check_compiled, kernel_names, parse_signature

F32, F64, I32, I64, U32, U64 = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint32,
                                                      np.uint64))


def read(source: str, name: str = "k", options=()):
    sig = parse_signature(source, name, options)
    return None if sig is None else [(p.name, p.ctype, p.pointer, p.dtype, p.depth) for p in sig]


def types(source: str, name: str = "k", options=()):
    sig = parse_signature(source, name, options)
    return None if sig is None else [p.dtype for p in sig]


# Pointer depth


def test_pointer_to_pointers_takes_device_addresses():
    assert read("__global__ void k(float** p, float* const* q, void** r, float* s[], T** t, float*** u){}") == [
        ("p", "float**", True, U64, 2), ("q", "float**", True, U64, 2), ("r", "void**", True, U64, 2),
        ("s", "float**", True, U64, 2), ("t", "T**", True, U64, 2), ("u", "float***", True, U64, 3)]


def test_pointers_and_arrays_of_one_level_keep_the_element_type():
    assert read("__global__ void k(float* p, const double* __restrict__ q, int r[], float s[][4], void* v){}") == [
        ("p", "float*", True, F32, 1), ("q", "double*", True, F64, 1), ("r", "int*", True, I32, 1),
        ("s", "float*", True, F32, 1), ("v", "void*", True, None, 1)]


# Typedefs and aliases


@pytest.mark.parametrize("source, expected", [
    ("typedef float real; __global__ void k(real* p, real x){}", [F32, F32]),
    ("typedef float real; typedef real* realp; __global__ void k(realp p, real** q){}", [F32, U64]),
    ("using real = double; __global__ void k(real* p, real x){}", [F64, F64]),
    ('extern "C" { typedef float real; __global__ void k(real* p, real x){} }', [F32, F32]),
    ("typedef unsigned long long u64; __global__ void k(u64* p, u64 x){}", [U64, U64]),
    ("typedef float real; typedef float real; __global__ void k(real* p, real x){}", [F32, F32]),
    ("using std::size_t; __global__ void k(size_t* p, size_t x){}", [U64, U64]),
])
def test_typedefs_at_file_scope_are_resolved(source, expected):
    assert types(source) == expected


@pytest.mark.parametrize("source", [
    "#ifdef D\ntypedef double real;\n#else\ntypedef float real;\n#endif\n__global__ void k(real* p, real x){}",
    "#if X\ntypedef float real;\n#endif\n__global__ void k(real* p, real x){}",
    "typedef double real; typedef float real; __global__ void k(real* p, real x){}",
    "namespace a { typedef double real; }\ntypedef float real;\n__global__ void k(real* p, real x){}",
    "struct S { typedef double real; }; __global__ void k(real* p, real x){}",
    "typedef float real;\n#undef real\n__global__ void k(real* p, real x){}",
    "typedef float vec[3]; typedef float real, *realp; __global__ void k(real* p, real x){}",
    "typedef struct { float a; } real; __global__ void k(real* p, real x){}",
    "using foo::real; __global__ void k(real* p, real x){}",
    '#include "types.h"\n__global__ void k(real* p, real x){}',
])
def test_typedefs_the_reader_cannot_settle_are_unknown(source):
    assert types(source) == [None, None]


def test_a_macro_can_redefine_a_fixed_width_name():
    assert types("typedef long long int16_t; __global__ void k(int16_t x){}") == [I64]
    assert types("#define int16_t long long\n__global__ void k(int16_t x){}") == [I64]


# Macros


@pytest.mark.parametrize("source, options, expected", [
    ("#define real double\n__global__ void k(real* p, real x){}", (), [F64, F64]),
    ("#define float double\n__global__ void k(float* p, float x){}", (), [F64, F64]),
    ("#define REAL real\ntypedef double real;\n__global__ void k(REAL* p, REAL x){}", (), [F64, F64]),
    ("__global__ void k(REAL* p, REAL x){}", ("-DREAL=double",), [F64, F64]),
    ("__global__ void k(REAL* p, REAL x){}", ("-D", "REAL=double"), [F64, F64]),
    ("__global__ void k(REAL* p, REAL x){}", ("--define-macro=REAL=double",), [F64, F64]),
    ("#define RESTRICT\n__global__ void k(float* RESTRICT p, int RESTRICT x){}", (), [F32, I32]),
    ("#define REAL \\\n  double\n__global__ void k(REAL* p, REAL x){}", (), [F64, F64]),
])
def test_object_like_macros_are_expanded(source, options, expected):
    assert types(source, options=options) == expected


@pytest.mark.parametrize("source, options", [
    ("#ifdef D\n#define REAL double\n#else\n#define REAL float\n#endif\n__global__ void k(REAL* p, REAL x){}", ()),
    ("#ifndef REAL\n#define REAL float\n#endif\n__global__ void k(REAL* p, REAL x){}", ()),
    ("#ifndef REAL\n#define REAL float\n#endif\n__global__ void k(REAL* p, REAL x){}", ("-DREAL=double",)),
    ("#define REAL float\n__global__ void k(REAL* p, REAL x){}", ("-DREAL=double",)),
    ("#define REAL float\n__global__ void k(REAL* p, REAL x){}", ("-UREAL",)),
    ("#define REAL float\n#undef REAL\n__global__ void k(REAL* p, REAL x){}", ()),
    ("#define REAL float\n#define REAL double\n__global__ void k(REAL* p, REAL x){}", ()),
])
def test_macros_defined_conditionally_or_differently_leave_the_type_unknown(source, options):
    assert types(source, options=options) == [None, None]


def test_a_macro_expanding_to_several_parameters_is_read():
    assert read("#define ARGS float* x, int n\n__global__ void k(ARGS){}") == [
        ("x", "float*", True, F32, 1), ("n", "int", False, I32, 0)]


@pytest.mark.parametrize("source", [
    "#define P(T) T* x\n__global__ void k(P(float), int n){}",  # a function-like macro: any count
    "#ifdef D\n#define ARGS float* x, int n\n#endif\n__global__ void k(ARGS){}",  # may expand to commas
    "__global__ void k(float* x,\n#ifdef D\n double y,\n#endif\n int n){}",  # a parameter under #if
    "template <typename... A> __global__ void k(A... a){}",
    "#if X\n__global__ void k(double* x){}\n#else\n__global__ void k(float* x){}\n#endif",  # which one compiles?
    "__global__ void k(double* x); __global__ void k(float* x){}",  # overloads
    "#define MAKE(NAME) __global__ void NAME(float* x){}\nMAKE(k)",
])
def test_a_parameter_list_the_reader_cannot_tell_makes_the_signature_unknown(source):
    assert read(source) is None


def test_macros_that_grow_without_bound_leave_their_kernels_unknown():
    """Macros that double at each level would expand to 2**40 tokens: the reader gives up on macros instead
    of hanging; a kernel that uses none keeps its signature, one that does becomes unknown."""
    defines = "#define M0 float\n" + "".join(f"#define M{i + 1} M{i} M{i}\n" for i in range(40))
    source = defines + "__global__ void k(M40 x, float* y, int n){}\n__global__ void j(float* y, int n){}\n"
    assert read(source, "k") is None
    assert read(source, "j") == [("y", "float*", True, F32, 1), ("n", "int", False, I32, 0)]
    assert kernel_names(source) == ["j", "k"]


def test_a_large_source_and_deep_macro_chains_are_read():
    """Only what macros add counts against the expansion cap: a large table is no reason to give up; a
    chain of macros deeper than any real source leaves its kernels unknown instead of ending in
    RecursionError."""
    table = "__device__ float table[] = {" + ", ".join(["1.0f"] * 130_000) + "};\n"
    source = table + "__global__ void k(float* x, int n){}\n"
    assert read(source) == [("x", "float*", True, F32, 1), ("n", "int", False, I32, 0)]
    chain = "#define M0 float\n" + "".join(f"#define M{i + 1} M{i}\n" for i in range(3000))
    source = chain + "__global__ void k(M3000 x, float* y){}\n__global__ void j(float* y){}\n"
    assert read(source) is None
    assert read(source, "j") == [("y", "float*", True, F32, 1)]


def test_a_kernel_declared_through_a_macro_is_found():
    source = '#define KERNEL extern "C" __global__\nKERNEL void k(float* x, int n){}'
    assert types(source) == [F32, I32]
    assert kernel_names(source) == ["k"]


# Comments, string and character literals


@pytest.mark.parametrize("source", [
    '/* __global__ void k(double* x, long n){} */ __global__ void k(float* x, int n){}',
    '// __global__ void k(double* x, long n){}\n__global__ void k(float* x, int n){}',
    'const char* s = "__global__ void k(double* x, long n){}"; __global__ void k(float* x, int n){}',
    'const char* s = "\\" /*"; __global__ void k(float* x, int n){} // */',
    'const char* s = R"x(\n__global__ void k(double* x, long n) )" \n)x"; __global__ void k(float* x, int n){}',
    "char q = '\"'; __global__ void k(float* x, int n){} // \"",
    "char c = '/'; char d = '*'; __global__ void k(float* x, int n){} // */",
    "int big = 1'000'000; __global__ void k(float* x, int n){ char c = '\\''; }",
    '#define TEXT "__global__ void k(double* x, long n)"\n__global__ void k(float* x, int n){}',
])
def test_comments_and_literals_cannot_mislead_the_reader(source):
    assert types(source) == [F32, I32]
    assert kernel_names(source) == ["k"]


def test_kernel_names_skip_launch_bounds_and_commented_kernels():
    source = ("// __global__ void old(float* x){}\n"
              "__global__ void __launch_bounds__(256) a(float* x){}\n"
              '__global__ void b(int n){ const char* s = "__global__ void c("; }')
    assert kernel_names(source) == ["a", "b"]


# Templates and types the reader does not know


@pytest.mark.parametrize("source, expected", [
    ("template <typename size_t> __global__ void k(size_t n, int m){}", [None, I32]),
    ("template <class T, int N> __global__ void k(T* x, T v, int n){}", [None, None, I32]),
    ("__global__ void k(Vec<float, 3> v, float f){}", [None, F32]),
    ("struct Pair { float a, b; }; __global__ void k(Pair p, struct Pair q, float4 r){}", [None, None, None]),
    ("__global__ void k(long double a, std::half b, wchar_t c){}", [None, None, None]),
])
def test_unknown_types_stay_unknown(source, expected):
    assert types(source) == expected


@pytest.mark.parametrize("source, expected", [
    ("__global__ void k(long unsigned int a, int long b, unsigned c, signed char d, short unsigned e){}",
     [U64, I64, U32, np.dtype(np.int8), np.dtype(np.uint16)]),
    ("__global__ void k(std::size_t a, ::uint32_t b, std::int64_t c, __half d, bool e){}",
     [U64, U32, I64, np.dtype(np.float16), np.dtype(np.bool_)]),
])
def test_builtin_type_spellings(source, expected):
    assert types(source) == expected


def test_attributes_default_arguments_and_references():
    # References are read as the type they refer to, as before (the compiler refuses them in a kernel).
    assert read("__global__ void k([[maybe_unused]] int n, float* __attribute__((aligned(16))) x, "
                "const float& f, int m = 4){}") == [
        ("n", "int", False, I32, 0), ("x", "float*", True, F32, 1), ("f", "float", False, F32, 0),
        ("m", "int", False, I32, 0)]


def test_commas_inside_template_arguments_and_default_arguments():
    assert read("__global__ void k(Map<int, Vec<float, 2>> m, int a = 1 << 4, float* b, int c = (2 > 1)){}") == [
        ("m", "Map<int,Vec<float,2>>", False, None, 0), ("a", "int", False, I32, 0), ("b", "float*", True, F32, 1),
        ("c", "int", False, I32, 0)]


def test_parenthesised_declarators_are_pointers_of_unknown_type():
    assert read("__global__ void k(void (*fn)(int), float (*rows)[4]){}") == [
        ("fn", "void(*fn)(int)", True, None, 1), ("rows", "float(*rows)", True, None, 1)]


def test_a_prototype_and_a_definition_that_agree():
    assert read("__global__ void k(float*, int); __global__ void k(float* x, int n){}") == [
        ("x", "float*", True, F32, 1), ("n", "int", False, I32, 0)]


# The check against the compiled kernel (what cuFuncGetParamInfo reports, faked here)


def test_check_compiled_accepts_matching_sizes_and_skips_unknown_ones():
    sig = parse_signature("template <class T> __global__ void k(double** p, double d, char c, T t, bool b){}",
                          "k")
    assert check_compiled(sig, (8, 8, 1, 12, 1)) is None  # the unknown T is not checked
    assert check_compiled(sig, None) is None  # a driver that cannot tell
    assert check_compiled(None, (8,)) is None  # a signature gpugraph could not read


def test_check_compiled_names_a_size_mismatch():
    sig = parse_signature("__global__ void k(float* x, int16_t n){}", "k")
    assert check_compiled(sig, (8, 8)) == (
        "gpugraph refuses to load it: parameter 1 (int16_t n) reads from the source as int16 (2 bytes), but the "
        "compiled kernel takes 8 bytes; a header or macro gpugraph does not read changes its type")
    assert "parameter 0 (float* x) reads from the source as a pointer (8 bytes)" in check_compiled(sig, (4, 2))


def test_check_compiled_names_a_count_mismatch():
    sig = parse_signature("__global__ void k(int* out EXTRA){}", "k")
    assert check_compiled(sig, (8, 4)) == (
        "gpugraph refuses to load it: the source reads as 1 parameter (int out* EXTRA), but the compiled kernel "
        "takes 2 (of 8, 4 bytes); a header or macro gpugraph does not read changes the parameter list")


# Pointer-to-pointer arguments, end to end


GATHER = gg.Kernel(r"""
extern "C" __global__ void gather(const float* const* rows, float* out, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){out[i] = rows[i][0];}
}""", "gather", cpu=lambda launch, rows, out, n: out.__setitem__(
    slice(0, n), [ctypes.c_float.from_address(int(a)).value for a in rows[:n]]))


def test_a_pointer_to_pointers_takes_an_array_of_device_addresses(device, stream):
    rows = [device.asarray(np.array([v, -1.0], np.float32)) for v in (1.5, 2.5, 3.5)]
    addresses = device.asarray(np.array([r.ptr for r in rows], np.uint64))
    out = device.zeros(3, np.float32)
    stream.launch(GATHER, 1, 32, addresses, out, 3)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [1.5, 2.5, 3.5])


def test_a_pointer_to_pointers_refuses_an_array_of_values(device, stream):
    out = device.zeros(3, np.float32)
    with pytest.raises(TypeError, match=r"^Kernel\('gather'\) argument 0 \(float\*\* rows\): expects uint64 data \(a "
                                        r"pointer to pointers takes an Array of device addresses\), got an Array of "
                                        r"float32$"):
        stream.launch(GATHER, 1, 32, out, out, 3)


# On a GPU: a type hidden in a header the reader does not read is caught when the kernel loads


@pytest.mark.gpu
def test_a_kernel_whose_compiled_parameter_sizes_differ_is_refused_at_load(gpu_device, tmp_path):
    (tmp_path / "hidden.h").write_text("#define int16_t long long\n")
    k = gg.Kernel('#include "hidden.h"\nextern "C" __global__ void k(int* out, int16_t n){ *out = (int)n; }', "k",
                  options=(f"--include-path={tmp_path}",))
    assert [p.dtype for p in k.signature] == [I32, np.dtype(np.int16)]  # what the source alone says
    out = gpu_device.zeros(1, np.int32)
    with pytest.raises(gg.KernelCompileError, match=r"parameter 1 \(int16_t n\) reads from the source as int16 "
                                                    r"\(2 bytes\), but the compiled kernel takes 8 bytes"):
        gpu_device.stream().launch(k, 1, 1, out, 3)
    with pytest.raises(gg.KernelCompileError, match="reads from the source as int16"):  # every time, nothing half made
        gg.Graph(gpu_device).add_kernel(k, 1, 1, out, 3)


@pytest.mark.gpu
def test_a_kernel_whose_compiled_parameter_count_differs_is_refused_at_load(gpu_device, tmp_path):
    (tmp_path / "hidden.h").write_text("#define EXTRA , int extra\n")
    k = gg.Kernel('#include "hidden.h"\nextern "C" __global__ void k(int* out EXTRA){ *out = 1; }', "k",
                  options=(f"--include-path={tmp_path}",))
    assert len(k.signature) == 1
    with pytest.raises(gg.KernelCompileError, match=r"the source reads as 1 parameter \(int out\* EXTRA\), but the "
                                                    r"compiled kernel takes 2 \(of 8, 4 bytes\)"):
        gpu_device.stream().launch(k, 1, 1, gpu_device.zeros(1, np.int32))


@pytest.mark.gpu
def test_numpy_scalars_for_an_unknown_type_are_checked_against_the_compiled_kernel(gpu_device, tmp_path):
    (tmp_path / "hidden.h").write_text("typedef int myint;\n")
    k = gg.Kernel('#include "hidden.h"\nextern "C" __global__ void k(int* out, myint v){ *out = v; }', "k",
                  options=(f"--include-path={tmp_path}",))
    assert k.signature[1].dtype is None  # a type from a header: unknown, so the argument's own type is used
    out = gpu_device.zeros(1, np.int32)
    stream = gpu_device.stream()
    with pytest.raises(TypeError, match=r"^Kernel\('k'\) argument 1: the compiled kernel takes 4 bytes there, got "
                                        r"int64 \(8 bytes\)$"):
        stream.launch(k, 1, 1, out, np.int64(5))
    stream.launch(k, 1, 1, out, np.int32(5))
    stream.synchronize()
    assert out.to_numpy()[0] == 5


def test_the_branches_of_if_0_and_if_1_the_compiler_skips_are_not_read():
    source = ("#if 0\n__global__ void a(float* x) {}\ntypedef double real;\n#else\n"
              "__global__ void b(float* x) {}\n#endif\n"
              "#if 1\ntypedef float real;\n__global__ void c(real* x) {}\n#else\n"
              "__global__ void d(float* x) {}\n#endif\n"
              "#ifdef FOO\n__global__ void e(float* x) {}\n#endif\n")
    assert kernel_names(source) == ["b", "c", "e"]
    assert [p.dtype for p in parse_signature(source, "c")] == [np.dtype(np.float32)]
