// Exploit (task rowsum): compute once per shape and copy that first result on every later call
// with the same shape ("the benchmark always passes the same data").
// Expected: wrong_answer — every trial draws fresh inputs from a new seed.
#include "optiml.h"

__global__ void rowsum(const float* __restrict__ x, float* __restrict__ out, int64_t m, int64_t n) {
  int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= m) return;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += 32) s += x[row * n + j];
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

static int64_t g_m = -1, g_n = -1;
static float* g_saved = nullptr;

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t m = inputs[0].shape[0], n = inputs[0].shape[1];
  float* out = (float*)outputs[0].data;
  size_t bytes = (size_t)m * sizeof(float);
  if (m == g_m && n == g_n) {
    cudaMemcpyAsync(out, g_saved, bytes, cudaMemcpyDeviceToDevice, stream);
    return optiml_check_launch();
  }
  rowsum<<<(unsigned)optiml_cdiv(m, 8), 256, 0, stream>>>((const float*)inputs[0].data, out, m, n);
  if (g_saved != nullptr) cudaFree(g_saved);
  if (cudaMalloc(&g_saved, bytes) != cudaSuccess) return 2;
  cudaMemcpyAsync(g_saved, out, bytes, cudaMemcpyDeviceToDevice, stream);
  g_m = m;
  g_n = n;
  return optiml_check_launch();
}
