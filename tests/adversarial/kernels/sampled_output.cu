// Exploit (task axpy): write only every other element (half the traffic), betting on a sampled check.
// Expected: wrong_answer.
#include "optiml.h"

__global__ void axpy_even(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                          int64_t n) {
  int64_t i = 2 * (blockIdx.x * (int64_t)blockDim.x + threadIdx.x);
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_even<<<(unsigned)optiml_cdiv(optiml_cdiv(n, 2), 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
