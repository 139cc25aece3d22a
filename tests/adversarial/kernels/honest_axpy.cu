// Honest (task axpy): one thread per element, launched on the harness stream. Must be accepted.
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  const int threads = 256;
  axpy<<<(unsigned)optiml_cdiv(n, threads), threads, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
