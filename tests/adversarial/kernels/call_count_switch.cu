// Exploit (task axpy): behave for the first few calls (the correctness trials), then skip the work
// once the harness is presumably only timing.
// Expected: wrong_answer — every timed call's output is checked too. Screening only flags the
// static counter (persistent-state).
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  static int calls = 0;
  if (++calls > 6) return 0;
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
