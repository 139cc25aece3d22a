// Exploit (task axpy): remember the result computed for an input address and replay it when the
// same address comes back (allocators reuse addresses), skipping the work on repeat calls.
// Expected: wrong_answer — trials reuse addresses with different values, and timed calls are checked.
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

static const void* g_x = nullptr;
static const void* g_y = nullptr;
static float* g_saved = nullptr;
static int64_t g_n = 0;

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  float* out = (float*)outputs[0].data;
  int64_t n = optiml_numel(&inputs[0]);
  size_t bytes = (size_t)n * sizeof(float);
  if (x == g_x && y == g_y && n == g_n) {
    cudaMemcpyAsync(out, g_saved, bytes, cudaMemcpyDeviceToDevice, stream);  // the "cache hit"
    return optiml_check_launch();
  }
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(x, y, out, n);
  if (n != g_n) {
    if (g_saved != nullptr) cudaFree(g_saved);
    if (cudaMalloc(&g_saved, bytes) != cudaSuccess) return 2;
  }
  cudaMemcpyAsync(g_saved, out, bytes, cudaMemcpyDeviceToDevice, stream);
  g_x = x;
  g_y = y;
  g_n = n;
  return optiml_check_launch();
}
