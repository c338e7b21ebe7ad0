// gpugraph's CPU backend: the CUDA/HIP kernel language for the host's C++ compiler.
//
// gpugraph compiles a kernel's source with this header first (backends/cpu/_compile.py). Each block of a
// launch runs on one worker thread. Its threads run one after another: in a plain loop when the source never
// synchronizes, else as fibers that switch at each __syncthreads, so that a barrier means what it means on a
// GPU. Warp-level intrinsics and cooperative groups are refused at compile time, naming themselves.
#pragma once

#include <assert.h>  // (this folder's: a failed assert stops the kernel, as gg::trap does)
#include <math.h>  // (libstdc++'s: the float overloads of sqrt, fabs, ... in the global namespace, as in CUDA)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cmath>  // (std::hypot of three, std::cyl_bessel_i)
#include <atomic>
#include <string>
#include <cstddef>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

// Declaration specifiers: the host compiler has one kind of function and memory.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __constant__
#define __managed__
#define __grid_constant__
// The CUDA runtime's own specifiers, which sources that declare its device functions themselves write (as
// cuda-python's samples declare cudaGraphSetConditional for NVRTC): the host compiler needs neither.
#define __cudart_builtin__
#define CUDARTAPI
#define __align__(n) __attribute__((aligned(n)))
// Shared memory: one copy per worker thread, which runs one block at a time (its fibers share it). In a
// function, thread_local alone is static, so `static __shared__` means the same.
#define __shared__ thread_local
#define __CUDA_ARCH__ 800  // (what a kernel tests to know it is device code; feature tests see an sm_80)
#define __HIP_DEVICE_COMPILE__ 1
#define GPUGRAPH_CPU 1

// Vector types, aligned as CUDA aligns them.
#define GG_VECTOR_TYPES(T, name, a2, a4)                                                                       \
    struct __attribute__((aligned(sizeof(T)))) name##1 { T x; };                                                \
    struct __attribute__((aligned(a2))) name##2 { T x, y; };                                                    \
    struct name##3 { T x, y, z; };                                                                              \
    struct __attribute__((aligned(a4))) name##4 { T x, y, z, w; };                                              \
    inline name##1 make_##name##1(T x) { return {x}; }                                                          \
    inline name##2 make_##name##2(T x, T y) { return {x, y}; }                                                  \
    inline name##3 make_##name##3(T x, T y, T z) { return {x, y, z}; }                                          \
    inline name##4 make_##name##4(T x, T y, T z, T w) { return {x, y, z, w}; }
GG_VECTOR_TYPES(signed char, char, 2, 4)
GG_VECTOR_TYPES(unsigned char, uchar, 2, 4)
GG_VECTOR_TYPES(short, short, 4, 8)
GG_VECTOR_TYPES(unsigned short, ushort, 4, 8)
GG_VECTOR_TYPES(int, int, 8, 16)
GG_VECTOR_TYPES(unsigned int, uint, 8, 16)
GG_VECTOR_TYPES(long, long, 16, 16)
GG_VECTOR_TYPES(unsigned long, ulong, 16, 16)
GG_VECTOR_TYPES(long long, longlong, 16, 16)
GG_VECTOR_TYPES(unsigned long long, ulonglong, 16, 16)
GG_VECTOR_TYPES(float, float, 8, 16)
GG_VECTOR_TYPES(double, double, 16, 16)
#undef GG_VECTOR_TYPES

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return {x, y, z}; }
};

// The launch's built-in variables, per worker thread (fibers set threadIdx as each one resumes).
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;
constexpr int warpSize = 32;

#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_DYNAMIC_SHARED(type, var) type* var = (type*)::gg::dynamic_shared();

// Half precision, where the compiler has _Float16: stored as IEEE binary16, computed in float and rounded to
// half after each operation.
#ifdef __FLT16_MAX__
struct __half {
    _Float16 value;
    __half() = default;
    constexpr __half(float f) : value(_Float16(f)) {}
    constexpr __half(double f) : value(_Float16(f)) {}
    constexpr __half(int i) : value(_Float16(i)) {}
    constexpr operator float() const { return float(value); }
};
typedef __half half;
// The operators of cuda_fp16.hpp: each result is rounded to half, as a GPU's half arithmetic rounds it. (Float
// computes +, -, *, / of two halves exactly enough that rounding its result to half is correctly rounded.)
inline __half operator+(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half operator-(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half operator*(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half operator/(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half operator-(__half a) { return __half(-float(a)); }
inline __half operator+(__half a) { return a; }
inline __half& operator+=(__half& a, __half b) { return a = a + b; }
inline __half& operator-=(__half& a, __half b) { return a = a - b; }
inline __half& operator*=(__half& a, __half b) { return a = a * b; }
inline __half& operator/=(__half& a, __half b) { return a = a / b; }
inline __half& operator++(__half& a) { return a += __half(1.0f); }
inline __half& operator--(__half& a) { return a -= __half(1.0f); }
inline __half operator++(__half& a, int) { __half old = a; ++a; return old; }
inline __half operator--(__half& a, int) { __half old = a; --a; return old; }
inline bool operator==(__half a, __half b) { return float(a) == float(b); }
inline bool operator!=(__half a, __half b) { return float(a) != float(b); }
inline bool operator<(__half a, __half b) { return float(a) < float(b); }
inline bool operator>(__half a, __half b) { return float(a) > float(b); }
inline bool operator<=(__half a, __half b) { return float(a) <= float(b); }
inline bool operator>=(__half a, __half b) { return float(a) >= float(b); }
struct __half2 { __half x, y; };
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half __hneg(__half a) { return __half(-float(a)); }
// (in double: the product is exact and 53 bits leave no double rounding, so the result is rounded once, as a GPU rounds it)
inline __half __hfma(__half a, __half b, __half c) { return __half(fma(double(a), double(b), double(c))); }
inline bool __heq(__half a, __half b) { return float(a) == float(b); }
inline bool __hlt(__half a, __half b) { return float(a) < float(b); }
inline bool __hgt(__half a, __half b) { return float(a) > float(b); }
inline __half2 make_half2(__half x, __half y) { return {x, y}; }
#endif

namespace gg {

// A kernel that calls __trap() or fails an assert stops: the exception unwinds to the launch's entry point,
// which stops its blocks and returns the message for gpugraph to raise when the stream is synchronized (CUDA
// reports the kernel's failure there too). An illegal address carries the address, for gpugraph to name the
// Array it lies past.
// (The entry point returns 1 + the kind.)
enum TrapKind { kAssert = 1, kTrap = 2, kNotSupported = 3, kIllegalAddress = 4 };
struct Trap {
    TrapKind kind;
    std::string message;
    uintptr_t address;
};
[[noreturn]] inline void trap(TrapKind kind, const std::string& what, uintptr_t address = 0) {
    char where[160];
    snprintf(where, sizeof where, "block (%u, %u, %u), thread (%u, %u, %u): ", blockIdx.x, blockIdx.y, blockIdx.z,
             threadIdx.x, threadIdx.y, threadIdx.z);
    throw Trap{kind, where + what, address};
}

// Faults. An integer division by zero (or INT_MIN / -1) gives an unspecified value on a GPU; on the CPU the
// instruction faults (SIGFPE). An access to memory the kernel was not given (past an Array's end, where gpugraph
// maps an inaccessible page after each allocation, or through a null or stale pointer) is an illegal address on
// a GPU; on the CPU it faults (SIGSEGV, or SIGBUS). While this library runs a kernel on a thread, the fault is a
// trap that stops the kernel (the library is built with -fnon-call-exceptions, so it can be thrown from the
// signal's handler); otherwise the handler that was there before is called, and the process fares as it would
// have without gpugraph. SA_NODEFER: a handler left by an exception would leave the signal blocked. SA_ONSTACK:
// a thread that overflows its stack (deep recursion) faults with no stack left for the handler, so each thread
// that runs kernels has an alternate stack for it (kernel_signal_stack), and the overflow stops the kernel too.
static thread_local bool running_kernel = false;
constexpr int kFaults[] = {SIGFPE, SIGSEGV, SIGBUS};
static struct sigaction previous_actions[3];
static void on_fault(int signal, siginfo_t* info, void* context) {
    if (running_kernel && info->si_code > 0) {  // (a fault: si_code <= 0 is a signal sent, as by kill)
        if (signal == SIGFPE) trap(kTrap, "integer division by zero or overflow (a GPU gives an unspecified value)");
        const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
        const char* access = "an access to";
#if defined(__x86_64__) && defined(__linux__)
        // (the page fault's error code: bit 1 is set for a write)
        access = static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2 ? "a write to" : "a read of";
#endif
        char what[160];
        snprintf(what, sizeof what, "illegal address: %s 0x%lx", access, static_cast<unsigned long>(address));
#if defined(__x86_64__) && defined(__linux__)
        // (at the stack pointer or just below it: the thread's stack, its local memory, is used up)
        const uintptr_t sp = static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RSP];
        if (address + 4096 > sp && address < sp + 4096)
            snprintf(what, sizeof what, "stack overflow: the thread used up its stack (its local memory), %s 0x%lx "
                     "(deep recursion, or large local arrays)", access, static_cast<unsigned long>(address));
#endif
        trap(kIllegalAddress, what, address);
    }
    int k = 0;
    while (kFaults[k] != signal) ++k;
    struct sigaction& previous = previous_actions[k];
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction != nullptr) previous.sa_sigaction(signal, info, context);
    } else if (previous.sa_handler != SIG_IGN && previous.sa_handler != SIG_DFL) {
        previous.sa_handler(signal);
    } else {
        sigaction(signal, &previous, nullptr);  // (the instruction faults again, with the default action)
    }
}
[[maybe_unused]] static const bool faults_handled = [] {
    struct sigaction action = {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    bool handled = true;
    for (int k = 0; k < 3; ++k) handled = sigaction(kFaults[k], &action, &previous_actions[k]) == 0 && handled;
    return handled;
}();

// Give the calling thread an alternate signal stack for on_fault, where it has none (once per thread, for the
// thread's life: libgomp's and gpugraph's worker threads are pooled).
inline void kernel_signal_stack() {
    static thread_local bool ready = false;
    if (ready) return;
    ready = true;
    stack_t current;
    if (sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;  // (one is there: keep it)
    constexpr size_t size = 256 << 10;
    void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return;
    stack_t stack = {};
    stack.ss_sp = memory;
    stack.ss_size = size;
    if (sigaltstack(&stack, nullptr) != 0) munmap(memory, size);
}

// Dynamic shared memory: the launch's shared_mem bytes, one buffer per worker thread.
inline thread_local std::vector<std::max_align_t> shared_buffer;
inline void* dynamic_shared() { return shared_buffer.data(); }

// Fibers: the threads of one block that synchronizes, each on its own stack, switched at each barrier.
// The scheduler resumes every live fiber once per pass; a fiber runs until the next barrier or its end, so
// when a pass ends every live fiber has reached the same barrier (or ended, as a GPU thread may). On x86-64 a
// switch saves and loads the callee-saved registers alone (a few nanoseconds); elsewhere it is ucontext's
// swapcontext, which also saves the signal mask with a system call.
// 1 MiB: more than the 512 KiB of local memory a GPU thread may have, so any kernel a GPU runs fits. Reserved
// without backing (MAP_NORESERVE): pages are taken as a fiber touches them.
constexpr size_t kFiberStack = 1 << 20;
constexpr size_t kGuard = 64 << 10;  // below each stack, unmapped: an overflow faults instead of overwriting

// A fiber's stack, mapped with its guard below it (as the memory's first kGuard bytes); null if it cannot be.
inline void* map_stack() {
    void* memory = mmap(nullptr, kGuard + kFiberStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    mprotect(memory, kGuard, PROT_NONE);
    return static_cast<char*>(memory) + kGuard;
}

#if defined(__x86_64__)
#define GG_FAST_SWITCH 1
// gg_fiber_switch(&from, to): saves the callee-saved registers, MXCSR and the x87 control word on the stack,
// stores the stack pointer in *from, and continues on stack `to` as its own switch left it.
asm(R"(
    .text
    .p2align 4
    .hidden gg_fiber_switch
    .globl gg_fiber_switch
    .type gg_fiber_switch, @function
gg_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size gg_fiber_switch, .-gg_fiber_switch
)");
extern "C" void gg_fiber_switch(void** from, void* to);
#endif

struct Fiber {
#if GG_FAST_SWITCH
    void* sp = nullptr;
#else
    ucontext_t context;
#endif
    void* stack = nullptr;
    uint3 index;
    bool done = false;
};

struct Block {
#if GG_FAST_SWITCH
    void* home = nullptr;
#else
    ucontext_t home;
#endif
    std::vector<Fiber> fibers;
    Fiber* current = nullptr;
    void (*body)(void*) = nullptr;
    void* arguments = nullptr;
    unsigned phase = 0;      // barriers passed so far
    long long counts[2];     // __syncthreads_count's sums, by the barrier's parity
    bool trapped = false;    // a fiber stopped the kernel (gg::trap): the block's other fibers are abandoned
    Trap trap;               // what stopped it
    ~Block() {
        for (Fiber& fiber : fibers)
            if (fiber.stack != nullptr) munmap(static_cast<char*>(fiber.stack) - kGuard, kGuard + kFiberStack);
    }
};

inline thread_local Block* block = nullptr;  // the block this worker runs as fibers, else null

inline void to_home(Block* b) {
#if GG_FAST_SWITCH
    gg_fiber_switch(&b->current->sp, b->home);
#else
    swapcontext(&b->current->context, &b->home);
#endif
}

extern "C" inline void gg_fiber_main() {
    Block* b = block;
    try {
        b->body(b->arguments);
    } catch (const Trap& trap) {  // (caught on the fiber's own stack: an exception cannot cross a switch)
        b->trapped = true;
        b->trap = trap;
    }
    b->current->done = true;
    to_home(b);  // (never resumed)
    abort();
}

inline void start_fiber(Block& b, Fiber& f) {
#if GG_FAST_SWITCH
    void** sp = reinterpret_cast<void**>((reinterpret_cast<uintptr_t>(f.stack) + kFiberStack) & ~uintptr_t(15));
    *--sp = nullptr;                                       // (gg_fiber_main starts as if called: rsp % 16 == 8)
    *--sp = reinterpret_cast<void*>(&gg_fiber_main);       // where the first switch's ret goes
    for (int r = 0; r < 6; ++r) *--sp = nullptr;           // rbp rbx r12 r13 r14 r15
    unsigned control[2];
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control[0]), "=m"(control[1]));
    *--sp = nullptr;
    memcpy(sp, control, 8);                                // this thread's floating-point modes
    f.sp = sp;
#else
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kFiberStack;
    f.context.uc_link = &b.home;
    makecontext(&f.context, gg_fiber_main, 0);
#endif
}

inline void resume(Block& b, Fiber& f) {
#if GG_FAST_SWITCH
    gg_fiber_switch(&b.home, f.sp);
#else
    swapcontext(&b.home, &f.context);
#endif
}

inline void run_fibers(unsigned threads, void (*body)(void*), void* arguments) {
    static thread_local Block fibers;
    Block& b = fibers;
    if (b.fibers.size() < threads) b.fibers.resize(threads);
    b.body = body;
    b.arguments = arguments;
    b.phase = 0;
    b.counts[0] = b.counts[1] = 0;
    b.trapped = false;
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = b.fibers[t];
        if (f.stack == nullptr) {
            f.stack = map_stack();
            if (f.stack == nullptr) trap(kTrap, "out of memory for the stacks of the block's threads");
        }
        start_fiber(b, f);
        f.done = false;
        f.index = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
    }
    block = &b;
    unsigned live = threads;
    while (live) {
        for (unsigned t = 0; t < threads; ++t) {
            Fiber& f = b.fibers[t];
            if (f.done) continue;
            b.current = &f;
            threadIdx = f.index;
            resume(b, f);
            if (b.trapped) {
                block = nullptr;
                throw b.trap;
            }
            if (f.done) --live;
        }
        ++b.phase;
        b.counts[b.phase % 2] = 0;  // (the next barrier's sum; the last one's stays for its readers)
    }
    block = nullptr;
}

// Whether the library calls a barrier anywhere, through a header or a macro too: the __syncthreads forms are
// templates, so a call instantiates BarrierMark's member, whose initializer runs when the library loads; gpugraph
// then runs its kernels' blocks as fibers (gg_uses_barriers).
inline bool& uses_barriers() {
    static bool used = false;
    return used;
}
struct BarrierUse {
    BarrierUse() { uses_barriers() = true; }
};
template <int> struct BarrierMark {
    static BarrierUse mark;
};
template <int N> BarrierUse BarrierMark<N>::mark;

template <int N = 0> long long barrier(long long add) {
    (void)&BarrierMark<N>::mark;
    Block* b = block;
    if (b == nullptr) trap(kTrap, "__syncthreads reached outside fibers (a bug in gpugraph's CPU backend)");
    unsigned phase = b->phase;
    b->counts[phase % 2] += add;
    to_home(b);
    return b->counts[phase % 2];
}

}  // namespace gg

// Graphs launched from a kernel (CUDA's device graph launch). gpugraph passes a GraphExec instantiated with
// device_launch as a number that names it; a launch of a graph gives its kernels a log (DeviceLaunches, after the
// arguments' slots), where cudaGraphLaunch notes each launch asked, and the CPU backend runs them when the kernel
// has run: a fire-and-forget launch at once, a tail or sibling launch after the launching graph, as CUDA orders
// them. A kernel outside a graph gets no log, and its launch fails as on CUDA (cudaErrorNotSupported).
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUstream_st* cudaStream_t;
enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorLaunchPendingCountExceeded = 69,
                 cudaErrorNotSupported = 801 };
typedef enum cudaError cudaError_t;
#define cudaStreamGraphTailLaunch ((cudaStream_t)0x0100000000000000ull)
#define cudaStreamGraphFireAndForget ((cudaStream_t)0x0200000000000000ull)
#define cudaStreamGraphFireAndForgetAsSibling ((cudaStream_t)0x0300000000000000ull)
namespace gg {
constexpr unsigned long long kDeviceLaunches = 256;  // the launches one kernel launch may ask
struct DeviceLaunches {
    unsigned long long current;             // the executable graph the kernel runs in (cudaGetCurrentGraphExec)
    std::atomic<unsigned long long> count;  // the launches asked (those past kDeviceLaunches are refused)
    unsigned long long entries[2 * kDeviceLaunches];  // (graph, mode) pairs, in the order asked
    const volatile unsigned long long* running;  // the executable graphs running now (0: a free slot)
    unsigned long long running_slots;
    const unsigned long long* conditions;  // the running graph's conditions: (handle, value's address) pairs
    unsigned long long condition_count;
};
inline bool is_running(const DeviceLaunches* log, unsigned long long graph) {
    for (unsigned long long k = 0; k < log->running_slots; ++k)
        if (log->running[k] == graph) return true;
    return false;
}
inline thread_local DeviceLaunches* device_launches = nullptr;  // (set on each worker thread of a launch)

// A kernel's parameters, read from 8-byte slots; the type codes gpugraph checks its packing against.
template <class T> constexpr char code() {
    if constexpr (std::is_same_v<T, cudaGraphExec_t>) return 'Q';  // (its handle: gpugraph reads it as a number)
    else if constexpr (std::is_pointer_v<T>) return 'P';
    else if constexpr (std::is_same_v<T, bool>) return '?';
    else if constexpr (std::is_same_v<T, float>) return 'f';
    else if constexpr (std::is_same_v<T, double>) return 'd';
    else if constexpr (std::is_integral_v<T>) {
        constexpr bool s = std::is_signed_v<T>;
        switch (sizeof(T)) {
            case 1: return s ? 'b' : 'B';
            case 2: return s ? 'h' : 'H';
            case 4: return s ? 'i' : 'I';
            case 8: return s ? 'q' : 'Q';
        }
        return 'x';
    }
#ifdef __FLT16_MAX__
    else if constexpr (std::is_same_v<T, __half>) return 'e';
#endif
    else return 'x';
}

template <class F> struct Signature;
template <class... P> struct Signature<void (*)(P...)> {
    using Arguments = std::tuple<std::decay_t<P>...>;
    static constexpr size_t count = sizeof...(P);
    static constexpr char codes[sizeof...(P) + 1] = {code<std::decay_t<P>>()..., '\0'};
};

template <class Arguments, size_t... I>
void unpack(Arguments& arguments, const char* slots, std::index_sequence<I...>) {
    // (A parameter of more than 8 bytes has the type code 'x': gpugraph refuses the kernel when it loads, before
    // any launch; it must still compile, so as not to break the other kernels of its source.)
    ((sizeof(std::tuple_element_t<I, Arguments>) <= 8
          ? (void)memcpy(&std::get<I>(arguments), slots + 8 * I, std::min<size_t>(8, sizeof(std::tuple_element_t<I, Arguments>)))
          : (void)0),
     ...);
}

template <auto F, class Arguments> void call(void* arguments) {
    std::apply(F, *static_cast<Arguments*>(arguments));
}

// Runs blocks [begin, end) of the launch (linear block numbers, x fastest). dims: grid x y z, block x y z.
template <auto F, bool Synchronizes>
int run(const unsigned* dims, unsigned shared, const char* slots, long long begin, long long end) {
    using S = Signature<decltype(F)>;
    typename S::Arguments arguments;
    unpack(arguments, slots, std::make_index_sequence<S::count>{});
    gridDim = dim3(dims[0], dims[1], dims[2]);
    blockDim = dim3(dims[3], dims[4], dims[5]);
    shared_buffer.resize((shared + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) + 1);
    const unsigned threads = dims[3] * dims[4] * dims[5];
    for (long long n = begin; n < end; ++n) {
        blockIdx = {unsigned(n % dims[0]), unsigned(n / dims[0] % dims[1]), unsigned(n / (dims[0] * dims[1]))};
        if constexpr (Synchronizes) {
            run_fibers(threads, call<F, typename S::Arguments>, &arguments);
        } else {
            for (unsigned z = 0; z < dims[5]; ++z)
                for (unsigned y = 0; y < dims[4]; ++y)
                    for (unsigned x = 0; x < dims[3]; ++x) {
                        threadIdx = {x, y, z};
                        std::apply(F, arguments);
                    }
        }
    }
    return 0;
}

template <class T> inline T bits_as(const void* from) {
    T to;
    memcpy(&to, from, sizeof(T));
    return to;
}

}  // namespace gg

// Barriers and fences.
template <int N = 0> void __syncthreads() { gg::barrier<N>(0); }
template <int N = 0> int __syncthreads_count(int predicate) { return int(gg::barrier<N>(predicate != 0)); }
template <int N = 0> int __syncthreads_and(int predicate) {
    return gg::barrier<N>(predicate != 0) == (long long)(blockDim.x * blockDim.y * blockDim.z);
}
template <int N = 0> int __syncthreads_or(int predicate) { return gg::barrier<N>(predicate != 0) != 0; }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __trap() { gg::trap(gg::kTrap, "__trap() called"); }
inline void __nanosleep(unsigned) {}
template <class T> inline T __ldg(const T* p) { return *p; }
inline long long clock64() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000ll + now.tv_nsec;
}

// Warp-level intrinsics and cooperative groups: a CPU thread has no warp to exchange values with. Each one is
// refused when a kernel uses it, by a compile error that names it.
#define GG_REFUSED(name)                                                                                       \
    template <class... A> inline unsigned long long name(A...) {                                               \
        static_assert(sizeof...(A) < 0, "gpugraph CPU backend: " #name " (a warp-level intrinsic) is not "     \
                      "supported on the CPU; run the kernel on a GPU, or give Kernel(..., cpu=fn)");           \
        return 0;                                                                                              \
    }
GG_REFUSED(__shfl_sync)
GG_REFUSED(__shfl_up_sync)
GG_REFUSED(__shfl_down_sync)
GG_REFUSED(__shfl_xor_sync)
GG_REFUSED(__shfl)
GG_REFUSED(__shfl_up)
GG_REFUSED(__shfl_down)
GG_REFUSED(__shfl_xor)
GG_REFUSED(__ballot_sync)
GG_REFUSED(__ballot)
GG_REFUSED(__any_sync)
GG_REFUSED(__all_sync)
GG_REFUSED(__any)
GG_REFUSED(__all)
GG_REFUSED(__activemask)
GG_REFUSED(__syncwarp)
GG_REFUSED(__match_any_sync)
GG_REFUSED(__match_all_sync)
GG_REFUSED(__reduce_add_sync)
GG_REFUSED(__reduce_min_sync)
GG_REFUSED(__reduce_max_sync)
GG_REFUSED(__reduce_and_sync)
GG_REFUSED(__reduce_or_sync)
GG_REFUSED(__reduce_xor_sync)
#undef GG_REFUSED

// Atomics: relaxed, as CUDA's are; blocks run on several worker threads at once. The overloads are CUDA's, no
// more, so that a kernel that compiles here compiles for a GPU (NVRTC 13 on an H200, 2026-11-23): atomicSub takes
// 32-bit integers only; a long long has atomicMin, atomicMax, atomicAnd, atomicOr and atomicXor; a double has
// atomicAdd only.
#define GG_ATOMIC_MIN_MAX(T)                                                                                   \
    inline T atomicMin(T* a, T v) {                                                                            \
        T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                          \
        while (v < old && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
        }                                                                                                      \
        return old;                                                                                            \
    }                                                                                                          \
    inline T atomicMax(T* a, T v) {                                                                            \
        T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                          \
        while (v > old && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
        }                                                                                                      \
        return old;                                                                                            \
    }
#define GG_ATOMIC_BITS(T)                                                                                      \
    GG_ATOMIC_MIN_MAX(T)                                                                                       \
    inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }                       \
    inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }                         \
    inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }
#define GG_ATOMIC_INT(T)                                                                                       \
    GG_ATOMIC_BITS(T)                                                                                          \
    inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }                       \
    inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }                     \
    inline T atomicCAS(T* a, T compare, T v) {                                                                 \
        __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                \
        return compare;                                                                                        \
    }
GG_ATOMIC_INT(int)
GG_ATOMIC_INT(unsigned int)
GG_ATOMIC_INT(unsigned long long)
GG_ATOMIC_BITS(long long)
#undef GG_ATOMIC_INT
#undef GG_ATOMIC_BITS
#undef GG_ATOMIC_MIN_MAX
inline int atomicSub(int* a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
inline unsigned int atomicSub(unsigned int* a, unsigned int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
inline unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}
inline unsigned int atomicInc(unsigned int* a, unsigned int limit) {
    unsigned int old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(a, &old, old >= limit ? 0u : old + 1, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
    return old;
}
inline unsigned int atomicDec(unsigned int* a, unsigned int limit) {
    unsigned int old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(a, &old, (old == 0 || old > limit) ? limit : old - 1, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
#define GG_ATOMIC_REAL(T, I)                                                                                   \
    inline T atomicAdd(T* a, T v) {                                                                            \
        I old = __atomic_load_n(reinterpret_cast<I*>(a), __ATOMIC_RELAXED);                                    \
        for (;;) {                                                                                             \
            T next = gg::bits_as<T>(&old) + v;                                                                 \
            I sum = gg::bits_as<I>(&next);                                                                     \
            if (__atomic_compare_exchange_n(reinterpret_cast<I*>(a), &old, sum, true, __ATOMIC_RELAXED,       \
                                            __ATOMIC_RELAXED))                                                 \
                return gg::bits_as<T>(&old);                                                                   \
        }                                                                                                      \
    }
GG_ATOMIC_REAL(float, unsigned int)
GG_ATOMIC_REAL(double, unsigned long long)
#ifdef __FLT16_MAX__
GG_ATOMIC_REAL(__half, unsigned short)
#endif
inline float atomicExch(float* a, float v) {
    unsigned int old = __atomic_exchange_n(reinterpret_cast<unsigned int*>(a), gg::bits_as<unsigned int>(&v),
                                           __ATOMIC_RELAXED);
    return gg::bits_as<float>(&old);
}
#undef GG_ATOMIC_REAL

// Conditional nodes: a handle is what gpugraph passes for a gg.Condition, a number that names it. A launch of a
// graph gives its kernels the graph's conditions in its log (DeviceLaunches::conditions: pairs of a handle and
// the address of the value the conditional node reads), and cudaGraphSetConditional sets one of those alone: a
// handle of no condition of the running graph (a stale one, another graph's, any number), or a call outside a
// graph, stops the kernel with an illegal address instead of writing anywhere. extern "C", as the CUDA runtime
// declares it, so that a source that declares it itself (for NVRTC, which has no CUDA header) compiles here too.
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" inline void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value) {
    const gg::DeviceLaunches* log = gg::device_launches;
    for (unsigned long long k = 0; log != nullptr && k < log->condition_count; ++k)
        if (log->conditions[2 * k] == handle) {
            __atomic_store_n(reinterpret_cast<unsigned int*>(log->conditions[2 * k + 1]), value, __ATOMIC_RELAXED);
            return;
        }
    char call[128];
    snprintf(call, sizeof call, "illegal address: cudaGraphSetConditional(0x%llx, %u): ", handle, value);
    gg::trap(gg::kIllegalAddress, call + std::string(log == nullptr
                                                         ? "the kernel runs outside a graph, which has no condition to "
                                                           "set (a kernel node of a graph sets its conditions)"
                                                         : "the handle names no condition of the graph the kernel "
                                                           "runs in (pass a gg.Condition of that graph)"));
}

extern "C" inline cudaError_t cudaGraphLaunch(cudaGraphExec_t graph, cudaStream_t stream) {
    gg::DeviceLaunches* log = gg::device_launches;
    if (log == nullptr)
        gg::trap(gg::kNotSupported, "cudaGraphLaunch: a kernel that launches graphs runs only as a kernel node of a "
                                    "graph (CUDA fails the kernel's launch: cudaErrorNotSupported)");
    const unsigned long long named = reinterpret_cast<unsigned long long>(stream), mode = named >> 56;
    if ((named & 0x00ffffffffffffffull) != 0 || mode < 1 || mode > 3) return cudaErrorInvalidValue;
    // A graph that runs (until its fire-and-forget and sibling launches have run too) is launched again only by
    // itself, as a tail launch: CUDA returns cudaErrorInvalidValue for any other launch of it and runs nothing
    // (measured on the H200: its own fire-and-forget and sibling launches, and any launch of it by a graph it
    // launched fire-and-forget or as a sibling).
    const unsigned long long launched = reinterpret_cast<unsigned long long>(graph);
    if (launched == log->current ? mode != 1 : gg::is_running(log, launched)) return cudaErrorInvalidValue;
    const unsigned long long at = log->count.fetch_add(1);
    if (at >= gg::kDeviceLaunches) return cudaErrorLaunchPendingCountExceeded;
    log->entries[2 * at] = reinterpret_cast<unsigned long long>(graph);
    log->entries[2 * at + 1] = mode;
    return cudaSuccess;
}
inline cudaGraphExec_t cudaGetCurrentGraphExec() {
    return gg::device_launches == nullptr ? nullptr : reinterpret_cast<cudaGraphExec_t>(gg::device_launches->current);
}

// Programmatic dependent launch: the CPU backend runs a programmatic edge as a full one (its source kernel has
// finished when its target starts), so there is nothing to trigger and nothing to wait for.
inline void cudaTriggerProgrammaticLaunchCompletion() {}
inline void cudaGridDependencySynchronize() {}

// min and max as CUDA declares them: integers of mixed signedness compare as the unsigned type; floating
// values as fmin/fmax do (a NaN loses).
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) return std::fmin(C(a), C(b));
    else return C(a) < C(b) ? C(a) : C(b);
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) return std::fmax(C(a), C(b));
    else return C(a) > C(b) ? C(a) : C(b);
}
inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// Math functions CUDA has beyond C's, and the intrinsics (here the same as the accurate functions).
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
namespace gg {
// sin(pi x) and cos(pi x) with x reduced exactly, as CUDA's sinpi and cospi are: x = n/2 + t with |t| <= 1/4 (no
// rounding: remainder and halves are exact), then sin and cos of pi t in the quadrant n. Integers give a zero sine
// with x's sign, half-integers a +0 cosine, as on a GPU.
inline void sincospi(double x, double* s, double* c) {
    if (!std::isfinite(x)) {
        *s = *c = x - x;  // (NaN, as sin and cos of infinity)
        return;
    }
    const double r = remainder(x, 2.0), n = nearbyint(2.0 * r), t = r - 0.5 * n;
    const double st = sin(M_PI * t), ct = cos(M_PI * t);
    switch (int(n) & 3) {
        case 0: *s = st; *c = ct; break;
        case 1: *s = ct; *c = -st; break;
        case 2: *s = -st; *c = -ct; break;
        default: *s = -ct; *c = st; break;
    }
    if (t == 0.0) {
        if ((int(n) & 1) == 0) *s = copysign(0.0, x);
        else *c = 0.0;
    }
}
}  // namespace gg
inline double sinpi(double x) { double s, c; gg::sincospi(x, &s, &c); return s; }
inline double cospi(double x) { double s, c; gg::sincospi(x, &s, &c); return c; }
inline float sinpif(float x) { return float(sinpi(x)); }  // (in double: rounded once, to float)
inline float cospif(float x) { return float(cospi(x)); }
inline float fdividef(float a, float b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { sincosf(x, s, c); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x == x ? x : 0.0f; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float rhypotf(float a, float b) { return 1.0f / hypotf(a, b); }
inline double rhypot(double a, double b) { return 1.0 / hypot(a, b); }
inline float norm3df(float a, float b, float c) { return float(std::hypot(double(a), double(b), double(c))); }
inline double norm3d(double a, double b, double c) { return std::hypot(a, b, c); }
inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline double norm4d(double a, double b, double c, double d) { return std::hypot(std::hypot(a, b), std::hypot(c, d)); }
inline float norm4df(float a, float b, float c, float d) { return float(norm4d(a, b, c, d)); }
inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
inline float rnorm4df(float a, float b, float c, float d) { return float(rnorm4d(a, b, c, d)); }
inline void sincospi(double x, double* s, double* c) { gg::sincospi(x, s, c); }
inline void sincospif(float x, float* s, float* c) {
    double ds, dc;
    gg::sincospi(x, &ds, &dc);
    *s = float(ds);
    *c = float(dc);
}
inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
inline float normcdff(float x) { return float(normcdf(x)); }
inline double cyl_bessel_i0(double x) { return std::cyl_bessel_i(0.0, fabs(x)); }
inline float cyl_bessel_i0f(float x) { return float(cyl_bessel_i0(x)); }
inline double cyl_bessel_i1(double x) { return x < 0 ? -std::cyl_bessel_i(1.0, -x) : std::cyl_bessel_i(1.0, x); }
inline float cyl_bessel_i1f(float x) { return float(cyl_bessel_i1(x)); }

namespace gg {
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
// erfc(x) * exp(x * x) for x > 2, by its continued fraction (Lentz): no overflow, and no error from rounding x * x.
inline double erfcx_fraction(double x) {
    double f = x, c = x, d = 0.0;
    for (int k = 1; k < 400; ++k) {
        double a = 0.5 * k;
        d = x + a * d; d = d == 0.0 ? 1e-300 : 1.0 / d;
        c = x + a / c; if (c == 0.0) c = 1e-300;
        double delta = c * d;
        f *= delta;
        if (fabs(delta - 1.0) < 1e-16) break;
    }
    return 0.5 * kTwoOverSqrtPi / f;
}
// The x with erfc(x) == y, 0 < y < 2: Newton's method on log(erfc) from a first guess (accurate in both tails).
inline double erfc_inverse(double y) {
    if (y <= 0.0) return y == 0.0 ? INFINITY : NAN;
    if (y >= 2.0) return y == 2.0 ? -INFINITY : NAN;
    if (y > 1.0) return -erfc_inverse(2.0 - y);
    double t = sqrt(-log(y / 2.0)), x = y > 0.5 ? (1.0 - y) * 0.886226925452758 : t - (log(t) + 0.5723649429247001) / (2.0 * t);
    for (int i = 0; i < 60; ++i) {
        double e = x > 2.0 ? erfcx_fraction(x) : erfc(x) * exp(x * x);  // erfc(x) = e * exp(-x*x)
        double step = (log(e) - x * x - log(y)) / (-kTwoOverSqrtPi / e);  // d log(erfc)/dx = -2/sqrt(pi)/erfcx
        x -= step;
        if (fabs(step) <= 1e-16 * fabs(x)) break;
    }
    return x;
}
}  // namespace gg
inline double erfcx(double x) { return x > 2.0 ? gg::erfcx_fraction(x) : exp(x * x) * erfc(x); }
inline float erfcxf(float x) { return float(erfcx(x)); }
inline double erfcinv(double y) { return gg::erfc_inverse(y); }
inline float erfcinvf(float y) { return float(erfcinv(y)); }
inline double erfinv(double y) {
    if (!(fabs(y) <= 1.0)) return NAN;
    if (y == 0.0) return y;  // (keeps the sign of a zero)
    return y > 0 ? gg::erfc_inverse(1.0 - y) : -gg::erfc_inverse(1.0 + y);
}
inline float erfinvf(float y) { return float(erfinv(y)); }
inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return float(normcdfinv(p)); }

// The intrinsics that round in a set direction (_rz, _ru, _rd): refused by name, like the warp intrinsics (the
// host's rounding mode is the process's; those of conversions to integers are exact and given below).
#define GG_DIRECTED(name)                                                                                      \
    template <class... A> inline double name(A...) {                                                           \
        static_assert(sizeof...(A) < 0, "gpugraph CPU backend: " #name " (an intrinsic with a set rounding "   \
                      "direction) is not supported on the CPU; use the _rn form, or give Kernel(..., cpu=fn)"); \
        return 0;                                                                                              \
    }
#define GG_DIRECTED3(name) GG_DIRECTED(name##_rz) GG_DIRECTED(name##_ru) GG_DIRECTED(name##_rd)
GG_DIRECTED3(__fadd) GG_DIRECTED3(__fsub) GG_DIRECTED3(__fmul) GG_DIRECTED3(__fdiv) GG_DIRECTED3(__frcp)
GG_DIRECTED3(__fsqrt) GG_DIRECTED3(__fmaf) GG_DIRECTED3(__dadd) GG_DIRECTED3(__dsub) GG_DIRECTED3(__dmul)
GG_DIRECTED3(__ddiv) GG_DIRECTED3(__drcp) GG_DIRECTED3(__dsqrt) GG_DIRECTED3(__fma) GG_DIRECTED3(__double2float)
GG_DIRECTED3(__int2float) GG_DIRECTED3(__uint2float) GG_DIRECTED3(__ll2float) GG_DIRECTED3(__ull2float)
GG_DIRECTED3(__ll2double) GG_DIRECTED3(__ull2double)
#undef GG_DIRECTED3
#undef GG_DIRECTED

// Conversions and bit casts.
// To integers in the four directions: rn (to nearest, ties to even), rz (toward zero), rd (down), ru (up). As on a
// GPU (PTX's cvt; an H200, 2026-11-24), a value beyond the type's range gives its nearest end, and NaN gives 0 from
// a float to a 32-bit integer, else the value with only the top bit set (a C++ cast of such a value is undefined:
// on x86 it gives the lowest value).
namespace gg {
template <class T, class F> inline T saturated(F rounded) {
    if (rounded != rounded) return sizeof(T) == 4 && sizeof(F) == 4 ? T(0) : T(1ull << (8 * sizeof(T) - 1));
    if (rounded <= F(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (rounded >= F(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(rounded);
}
}  // namespace gg
#define GG_TO_INTEGER(from, F, to, T)                                                                          \
    inline T __##from##2##to##_rn(F x) { return gg::saturated<T>(nearbyint(x)); }                            \
    inline T __##from##2##to##_rz(F x) { return gg::saturated<T>(trunc(x)); }                                 \
    inline T __##from##2##to##_rd(F x) { return gg::saturated<T>(floor(x)); }                                 \
    inline T __##from##2##to##_ru(F x) { return gg::saturated<T>(ceil(x)); }
GG_TO_INTEGER(float, float, int, int) GG_TO_INTEGER(float, float, uint, unsigned int)
GG_TO_INTEGER(float, float, ll, long long) GG_TO_INTEGER(float, float, ull, unsigned long long)
GG_TO_INTEGER(double, double, int, int) GG_TO_INTEGER(double, double, uint, unsigned int)
GG_TO_INTEGER(double, double, ll, long long) GG_TO_INTEGER(double, double, ull, unsigned long long)
#undef GG_TO_INTEGER
inline float __ll2float_rn(long long x) { return float(x); }
inline float __ull2float_rn(unsigned long long x) { return float(x); }
inline double __ll2double_rn(long long x) { return double(x); }
inline double __ull2double_rn(unsigned long long x) { return double(x); }
inline int __double2hiint(double x) { return int(gg::bits_as<unsigned long long>(&x) >> 32); }
inline int __double2loint(double x) { return int(gg::bits_as<unsigned long long>(&x) & 0xffffffffu); }
inline double __hiloint2double(int hi, int lo) {
    unsigned long long bits = ((unsigned long long)(unsigned int)hi << 32) | (unsigned int)lo;
    return gg::bits_as<double>(&bits);
}
inline float __double2float_rn(double x) { return float(x); }
inline float __int2float_rn(int x) { return float(x); }
inline float __uint2float_rn(unsigned int x) { return float(x); }
inline double __int2double_rn(int x) { return double(x); }
inline int __float_as_int(float x) { return gg::bits_as<int>(&x); }
inline unsigned int __float_as_uint(float x) { return gg::bits_as<unsigned int>(&x); }
inline float __int_as_float(int x) { return gg::bits_as<float>(&x); }
inline float __uint_as_float(unsigned int x) { return gg::bits_as<float>(&x); }
inline long long __double_as_longlong(double x) { return gg::bits_as<long long>(&x); }
inline double __longlong_as_double(long long x) { return gg::bits_as<double>(&x); }

// Integer intrinsics.
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
    return r;
}
inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i, x >>= 1) r = (r << 1) | (x & 1ull);
    return r;
}
inline int __mul24(int a, int b) { return int((long long)((a << 8) >> 8) * ((b << 8) >> 8)); }
inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return int(((long long)a * b) >> 32); }
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned int __sad(int a, int b, unsigned int c) { return c + (unsigned int)(a > b ? a - b : b - a); }
inline unsigned int __usad(unsigned int a, unsigned int b, unsigned int c) { return c + (a > b ? a - b : b - a); }
inline int __hadd(int a, int b) { return int(((long long)a + b) >> 1); }
inline int __rhadd(int a, int b) { return int(((long long)a + b + 1) >> 1); }
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long joined = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)((joined << (shift & 31)) >> 32);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long joined = ((unsigned long long)hi << 32) | lo;
    return (unsigned int)(joined >> (shift & 31));
}

[[noreturn]] inline void gg_assert_failed(const char* expression, const char* file, unsigned line,
                                          const char* function) {
    gg::trap(gg::kAssert, std::string(file) + ":" + std::to_string(line) + ": " + function + ": Assertion `" +
                              expression + "` failed.");
}

namespace gg {
// What stopped the calling thread's last launch, and the illegal address it reached (0: none), which the library's
// gg_stop_message and gg_stop_address read.
inline thread_local std::string last_stop;
inline thread_local uintptr_t last_stop_address = 0;

// The launch's entry point for kernel F: runs blocks [begin, end), spread over `workers` threads where the module
// is built with OpenMP (libgomp keeps one pool for the process), and returns 0, or 1 + the kind of the first trap
// that stopped a block, with its message in last_stop.
template <auto F>
int enter(const unsigned* dims, unsigned shared, const char* slots, long long begin, long long end, int workers) {
    std::atomic<int> status{0};
    std::string message;  // (written once, by the block whose trap sets the status, as is the address)
    uintptr_t address = 0;
    const bool fibers = uses_barriers();
    DeviceLaunches* launches;  // (the slot after the arguments': null outside a graph)
    memcpy(&launches, slots + 8 * Signature<decltype(F)>::count, sizeof launches);
    auto blocks = [&](long long first, long long last) {
        kernel_signal_stack();
        running_kernel = true;
        device_launches = launches;
        try {
            if (fibers)
                run<F, true>(dims, shared, slots, first, last);
            else
                run<F, false>(dims, shared, slots, first, last);
        } catch (const Trap& trap) {  // (no exception may leave an OpenMP region)
            int none = 0;
            if (status.compare_exchange_strong(none, 1 + trap.kind)) {
                message = trap.message;
                address = trap.address;
            }
        }
        running_kernel = false;
        device_launches = nullptr;
    };
#ifdef _OPENMP
    if (workers > 1) {
        // Several pieces per worker, taken as workers come free: blocks of a kernel need not take equal time.
        const long long pieces = std::min<long long>(end - begin, 8LL * workers);
#pragma omp parallel for num_threads(workers) schedule(dynamic, 1)
        for (long long piece = 0; piece < pieces; ++piece)
            blocks(begin + (end - begin) * piece / pieces, begin + (end - begin) * (piece + 1) / pieces);
    } else
#endif
        blocks(begin, end);
    fflush(stdout);  // (printf's output appears when the kernel has run, as a synchronize shows it on a GPU)
    if (status.load() != 0) {
        last_stop = message;
        last_stop_address = address;
    }
    return status.load();
}
}  // namespace gg
