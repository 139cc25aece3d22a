// Exploit (task axpy, threat class 2): do the whole job in optiml_workspace_bytes, which the harness
// used to call untimed on the real buffers before each call; the timed call only copies the answer.
// Expected: wrong_answer — workspace sizes are asked with shapes only (every device `data` NULL), once
// per shape set, so nothing can be computed there and the copy returns whatever the buffer held.
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

static float* g_answer = nullptr;
static int64_t g_n = 0;

static int ensure_answer(int64_t n) {
  if (g_n == n) return 0;
  if (g_answer != nullptr) cudaFree(g_answer);
  if (cudaMalloc(&g_answer, (size_t)n * sizeof(float)) != cudaSuccess) return 1;
  g_n = n;
  return 0;
}

OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  if (n_inputs == 2 && inputs[0].data != nullptr && inputs[1].data != nullptr) {
    int64_t n = optiml_numel(&inputs[0]);
    if (ensure_answer(n) == 0) {
      axpy<<<(unsigned)optiml_cdiv(n, 256), 256>>>((const float*)inputs[0].data, (const float*)inputs[1].data,
                                                   g_answer, n);
      cudaDeviceSynchronize();  // finished before the timer starts
    }
  }
  return 256;  // ask for scratch, so that the harness calls this before binding
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  if (ensure_answer(n) != 0) return 2;
  cudaMemcpyAsync(outputs[0].data, g_answer, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  return optiml_check_launch();
}
