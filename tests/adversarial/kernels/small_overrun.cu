// Exploit (task axpy): compute correctly, then write 64 floats just past the end of the output —
// inside the allocator's slack or a neighbouring tensor, so nothing faults and nothing looks wrong.
// Expected: integrity (the harness's guard region behind each output is found changed) or a
// runtime error; never ok.
#include "optiml.h"

__global__ void axpy_overrun(const float* __restrict__ x, const float* __restrict__ y, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
  if (i < 64) out[n + i] = 0.0f;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_overrun<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
