// Exploit (task axpy): compute the right answer but zero the second input afterwards (a candidate
// that uses its inputs as scratch corrupts the next call and the reference comparison).
// Expected: integrity — inputs are compared byte for byte after every call.
#include "optiml.h"

__global__ void axpy_and_zero(const float* __restrict__ x, float* y, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = 2.5f * x[i] + y[i];
    y[i] = 0.0f;
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_and_zero<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
