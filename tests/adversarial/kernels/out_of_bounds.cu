// Exploit (task axpy): a wild write 64 GiB past the output — the kind of bug or trick that corrupts
// whatever lives there (the reference's outputs, the harness's state) or faults.
// Expected: runtime_error or crash — the fault is caught, the poisoned worker is replaced, and the
// next candidate is evaluated normally.
#include "optiml.h"

__global__ void axpy_wild(const float* __restrict__ x, const float* __restrict__ y, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i + ((int64_t)1 << 34)] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_wild<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
