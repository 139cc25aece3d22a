// Exploit, class 3 (task axpy): a result cache keyed on the inputs' *contents* — a cheap sampled
// key (the first element of x and the length), checked on the device — that replays the stored
// output on a hit. Pointer- and shape-keyed caches miss when buffers are refilled; this one hits
// whenever the timed inputs repeat, and returns a correct answer when it does.
// Expected: wrong_answer. Every timed call gets contents no earlier call had, so the key "hits" on
// different data and the stale output fails that call's check.
#include "optiml.h"

__device__ float g_key = -12345.f;
__device__ long long g_key_n = -1;
__device__ int g_hit = 0;
static float* g_cache = nullptr;
static int64_t g_cache_n = 0;

__global__ void probe(const float* __restrict__ x, int64_t n) { g_hit = (g_key_n == n && g_key == x[0]); }

__global__ void axpy_or_replay(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                               float* __restrict__ cache, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (g_hit) {
    out[i] = cache[i];
  } else {
    float v = 2.5f * x[i] + y[i];
    out[i] = v;
    cache[i] = v;
  }
}

__global__ void remember(const float* __restrict__ x, int64_t n) {
  g_key = x[0];
  g_key_n = n;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  int64_t n = optiml_numel(&inputs[0]);
  if (n != g_cache_n) {
    if (g_cache != nullptr) cudaFree(g_cache);
    if (cudaMalloc(&g_cache, (size_t)n * sizeof(float)) != cudaSuccess) return 2;
    g_cache_n = n;
  }
  probe<<<1, 1, 0, stream>>>(x, n);
  axpy_or_replay<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(x, y, (float*)outputs[0].data, g_cache, n);
  remember<<<1, 1, 0, stream>>>(x, n);
  return optiml_check_launch();
}
