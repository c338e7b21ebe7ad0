// The C++ floor of the benchmark's conditional solver (workload "solver"): the Jacobi solver of
// gpugraph.examples.conditional_solver as the same one-launch graph (a WHILE node whose body is two sweeps and
// the check), built with the CUDA runtime from the same kernels (../examples/jacobi.cuh).
//
// Usage: floor_solver N DIAGONAL TOLERANCE LIMIT RUNS. Prints JSON: the median over RUNS of the time to converge
// (launch to synchronize, ms) and of the host time of the launch call (µs), and the sweeps made.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "../examples/jacobi.cuh"

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        cudaError_t check_err = (call);                                                             \
        if (check_err != cudaSuccess) {                                                             \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(check_err));           \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static cudaGraphNode_t add_kernel(cudaGraph_t graph, const cudaGraphNode_t* after, size_t count, void* function,
                                  unsigned grid, unsigned block, void** args) {
    cudaKernelNodeParams p = {};
    p.func = function;
    p.gridDim = dim3(grid);
    p.blockDim = dim3(block);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, graph, after, count, &p));
    return node;
}

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: floor_solver N DIAGONAL TOLERANCE LIMIT RUNS\n");
        return 2;
    }
    int n = std::atoi(argv[1]);
    double diagonal = std::atof(argv[2]), tolerance = std::atof(argv[3]);
    unsigned long long limit = std::strtoull(argv[4], nullptr, 10);
    const int runs = std::atoi(argv[5]), block = 256, grid = (n + block - 1) / block;

    std::vector<double> ones(n, 1.0);
    double *b, *x, *y;
    unsigned long long* state;
    CHECK(cudaMalloc(&b, n * sizeof(double)));
    CHECK(cudaMalloc(&x, n * sizeof(double)));
    CHECK(cudaMalloc(&y, n * sizeof(double)));
    CHECK(cudaMalloc(&state, 3 * sizeof(unsigned long long)));
    CHECK(cudaMemcpy(b, ones.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle handle;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams loop = {};
    loop.type = cudaGraphNodeTypeConditional;
    loop.conditional.handle = handle;
    loop.conditional.type = cudaGraphCondTypeWhile;
    loop.conditional.size = 1;
    cudaGraphNode_t loop_node;
#if CUDART_VERSION >= 13000
    CHECK(cudaGraphAddNode(&loop_node, graph, nullptr, nullptr, 0, &loop));
#else
    CHECK(cudaGraphAddNode(&loop_node, graph, nullptr, 0, &loop));
#endif
    cudaGraph_t body = loop.conditional.phGraph_out[0];
    void* first_args[] = {&b, &x, &y, &diagonal, &n, &state};
    void* second_args[] = {&b, &y, &x, &diagonal, &n, &state};
    void* check_args[] = {&state, &tolerance, &limit, &handle};
    cudaGraphNode_t first = add_kernel(body, nullptr, 0, (void*)jacobi_sweep, grid, block, first_args);
    cudaGraphNode_t second = add_kernel(body, &first, 1, (void*)jacobi_sweep, grid, block, second_args);
    add_kernel(body, &second, 1, (void*)jacobi_check, 1, 1, check_args);
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    std::vector<double> converge_ms, launch_us;
    unsigned long long done[3] = {0, 0, 0};
    for (int run = 0; run <= runs; ++run) {  // (run 0 warms up)
        CHECK(cudaMemsetAsync(x, 0, n * sizeof(double), stream));
        CHECK(cudaMemsetAsync(y, 0, n * sizeof(double), stream));
        CHECK(cudaMemsetAsync(state, 0, 3 * sizeof(unsigned long long), stream));
        CHECK(cudaStreamSynchronize(stream));
        auto start = std::chrono::steady_clock::now();
        CHECK(cudaGraphLaunch(exec, stream));
        auto launched = std::chrono::steady_clock::now();
        CHECK(cudaStreamSynchronize(stream));
        auto end = std::chrono::steady_clock::now();
        if (run > 0) {
            converge_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
            launch_us.push_back(std::chrono::duration<double, std::micro>(launched - start).count());
        }
    }
    CHECK(cudaMemcpy(done, state, sizeof done, cudaMemcpyDeviceToHost));
    std::printf("{\"converge_ms\": %.4f, \"launch_us\": %.3f, \"sweeps\": %llu}\n", median(converge_ms),
                median(launch_us), done[1]);
    return 0;
}
