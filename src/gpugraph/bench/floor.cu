// The C++ floor of the host-side figures in docs/performance.md: what a program calling the CUDA
// runtime directly reaches on the same GPU in the same run. Prints one JSON object of medians (µs).
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call) do { cudaError_t check_err = (call); if (check_err != cudaSuccess) { \
    std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(check_err)); std::exit(1); } } while (0)

__global__ void tiny(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }
__global__ void scale(float* out, const float* in, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = f * in[i];
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

// A chain of ``nodes`` tiny kernel nodes added one by one (explicit construction), one parameter struct reused
// (the runtime copies it and the arguments at each add).
static cudaGraph_t build_chain(float* x, int nodes) {
    int n = 32;
    void* args[2] = {&x, &n};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(tiny);
    p.gridDim = dim3(1);
    p.blockDim = dim3(32);
    p.kernelParams = args;
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t last = nullptr, node;
    for (int i = 0; i < nodes; ++i) {
        CHECK(cudaGraphAddKernelNode(&node, g, last ? &last : nullptr, last ? 1 : 0, &p));
        last = node;
    }
    return g;
}

static cudaGraph_t capture_chain(cudaStream_t s, float* x, int nodes) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; ++i) tiny<<<1, 32, 0, s>>>(x, 32);
    CHECK(cudaStreamEndCapture(s, &g));
    return g;
}

// The dynamic-parameter workload (NVIDIA's post's): 8 kernels per iteration, kernels 1, 3, 5, 7 take 1 + 0.001 * iteration.
static void enqueue_seed(cudaStream_t s, const float* in, float* ping, float* pong, int it) {
    const float* src = in;
    for (int k = 0; k < 8; ++k) {
        float* dst = (k % 2 == 0) ? ping : pong;
        float f = (k % 2 == 0) ? 1.004f : 1.0f + 0.001f * it;
        scale<<<1, 256, 0, s>>>(dst, src, f, 32);
        src = dst;
    }
}

int main(int argc, char** argv) {
    const int nodes = 1000, launches = 10000, seed_iterations = argc > 1 ? std::atoi(argv[1]) : 40000;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x, *in, *ping, *pong;
    CHECK(cudaMalloc(&x, 32 * sizeof(float)));
    CHECK(cudaMalloc(&in, 32 * sizeof(float)));
    CHECK(cudaMalloc(&ping, 32 * sizeof(float)));
    CHECK(cudaMalloc(&pong, 32 * sizeof(float)));
    CHECK(cudaMemset(in, 0, 32 * sizeof(float)));

    std::vector<double> t;
    for (int r = 0; r < 8; ++r) {  // stream launch, end to end per kernel
        double t0 = now_us();
        for (int i = 0; i < launches; ++i) tiny<<<1, 32, 0, s>>>(x, 32);
        CHECK(cudaStreamSynchronize(s));
        if (r) t.push_back((now_us() - t0) / launches);
    }
    double launch_us = median(t);

    std::vector<double> capture, build, instantiate, update, launch_call, gpu_node, set_params;
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    for (int r = 0; r < 8; ++r) {
        double t0 = now_us();
        cudaGraph_t g = capture_chain(s, x, nodes);
        capture.push_back((now_us() - t0) / nodes);
        t0 = now_us();
        cudaGraph_t built = build_chain(x, nodes);
        build.push_back((now_us() - t0) / nodes);
        CHECK(cudaGraphDestroy(built));
        cudaGraphExec_t e;
        t0 = now_us();
        CHECK(cudaGraphInstantiate(&e, g, 0));
        instantiate.push_back((now_us() - t0) / nodes);
        cudaGraph_t g2 = capture_chain(s, x, nodes);
        cudaGraphExecUpdateResultInfo info;
        t0 = now_us();
        CHECK(cudaGraphExecUpdate(e, g2, &info));
        update.push_back((now_us() - t0) / nodes);
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < 20; ++i) {
            t0 = now_us();
            CHECK(cudaGraphLaunch(e, s));
            launch_call.push_back(now_us() - t0);
            CHECK(cudaStreamSynchronize(s));
        }
        CHECK(cudaEventRecord(start, s));
        CHECK(cudaGraphLaunch(e, s));
        CHECK(cudaEventRecord(end, s));
        CHECK(cudaEventSynchronize(end));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, start, end));
        gpu_node.push_back(ms * 1000.0 / nodes);
        size_t count = 0;
        CHECK(cudaGraphGetNodes(g, nullptr, &count));
        std::vector<cudaGraphNode_t> graph_nodes(count);
        CHECK(cudaGraphGetNodes(g, graph_nodes.data(), &count));
        cudaKernelNodeParams p;
        CHECK(cudaGraphKernelNodeGetParams(graph_nodes[0], &p));
        for (int i = 0; i < 100; ++i) {
            t0 = now_us();
            CHECK(cudaGraphExecKernelNodeSetParams(e, graph_nodes[0], &p));
            set_params.push_back(now_us() - t0);
        }
        CHECK(cudaGraphExecDestroy(e));
        CHECK(cudaGraphDestroy(g));
        CHECK(cudaGraphDestroy(g2));
    }

    // The dynamic-parameter workload, three ways (µs per iteration).
    double t0 = now_us();
    for (int it = 0; it < seed_iterations; ++it) enqueue_seed(s, in, ping, pong, it);
    CHECK(cudaStreamSynchronize(s));
    double no_graph = (now_us() - t0) / seed_iterations;

    cudaGraphExec_t e = nullptr;
    t0 = now_us();
    for (int it = 0; it < seed_iterations; ++it) {
        cudaGraph_t g;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        enqueue_seed(s, in, ping, pong, it);
        CHECK(cudaStreamEndCapture(s, &g));
        if (e == nullptr) {
            CHECK(cudaGraphInstantiate(&e, g, 0));
        } else {
            cudaGraphExecUpdateResultInfo info;
            CHECK(cudaGraphExecUpdate(e, g, &info));
        }
        CHECK(cudaGraphDestroy(g));
        CHECK(cudaGraphLaunch(e, s));
    }
    CHECK(cudaStreamSynchronize(s));
    double recapture = (now_us() - t0) / seed_iterations;
    CHECK(cudaGraphExecDestroy(e));

    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enqueue_seed(s, in, ping, pong, 0);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&e, g, 0));
    size_t count = 8;
    std::vector<cudaGraphNode_t> seed_nodes(count);
    CHECK(cudaGraphGetNodes(g, seed_nodes.data(), &count));
    std::vector<cudaKernelNodeParams> params(count);
    for (size_t k = 0; k < count; ++k) CHECK(cudaGraphKernelNodeGetParams(seed_nodes[k], &params[k]));
    t0 = now_us();
    for (int it = 0; it < seed_iterations; ++it) {
        float f = 1.0f + 0.001f * it;
        for (size_t k = 1; k < count; k += 2) {
            void* args[4] = {params[k].kernelParams[0], params[k].kernelParams[1], &f, params[k].kernelParams[3]};
            cudaKernelNodeParams q = params[k];
            q.kernelParams = args;
            CHECK(cudaGraphExecKernelNodeSetParams(e, seed_nodes[k], &q));
        }
        CHECK(cudaGraphLaunch(e, s));
    }
    CHECK(cudaStreamSynchronize(s));
    double combined = (now_us() - t0) / seed_iterations;

    std::printf("{\"stream_launch\": %.3f, \"capture_per_node\": %.3f, \"build_per_node\": %.3f, "
                "\"instantiate_per_node\": %.3f, "
                "\"update_per_node\": %.3f, \"graph_launch_call\": %.3f, \"gpu_per_node\": %.3f, "
                "\"set_params\": %.3f, \"seed_no_graph\": %.3f, \"seed_recapture_update\": %.3f, "
                "\"seed_combined\": %.3f}\n",
                launch_us, median(capture), median(build), median(instantiate), median(update), median(launch_call),
                median(gpu_node), median(set_params), no_graph, recapture, combined);
    return 0;
}
