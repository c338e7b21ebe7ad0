// Kernels of the Jacobi solver (gpugraph.examples.conditional_solver), one source for every backend and for the
// benchmark's C++ program (bench/floor_solver.cu), which includes this file.
//
// A x = b for A = tridiag(-1, diagonal, -1): a sweep computes y = (b + x[i-1] + x[i+1]) / diagonal and the largest
// change |y - x| of the sweep; a check decides from that change whether the solver goes on.

#ifdef __CUDACC_RTC__  // (NVRTC has no CUDA runtime header; nvcc's and gpugraph's CPU header declare it)
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
#endif

// state[0]: the largest change since the last check, as its bits (a non-negative double orders as its bits do, so
// an integer atomicMax finds it); state[1]: the sweeps made; state[2]: the change the last check saw.
extern "C" __global__ void jacobi_sweep(const double* b, const double* x, double* y, double diagonal, int n,
                                        unsigned long long* state) {
    __shared__ double largest[256];  // (blocks of 256 threads)
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    double change = 0.0;
    if (i < n) {
        const double left = i > 0 ? x[i - 1] : 0.0, right = i + 1 < n ? x[i + 1] : 0.0;
        const double value = (b[i] + left + right) / diagonal;
        y[i] = value;
        change = fabs(value - x[i]);
    }
    largest[threadIdx.x] = change;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) largest[threadIdx.x] = fmax(largest[threadIdx.x], largest[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicMax(&state[0], (unsigned long long)__double_as_longlong(largest[0]));
}

// After two sweeps: counts them, keeps the change seen and clears it for the next two; with a condition (handle
// not 0), sets it to go on while the change is above the tolerance and fewer than `limit` sweeps were made.
extern "C" __global__ void jacobi_check(unsigned long long* state, double tolerance, unsigned long long limit,
                                        unsigned long long handle) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const double change = __longlong_as_double((long long)state[0]);
        state[0] = 0;
        state[1] += 2;
        state[2] = (unsigned long long)__double_as_longlong(change);
        if (handle != 0) cudaGraphSetConditional(handle, change > tolerance && state[1] < limit);
    }
}
