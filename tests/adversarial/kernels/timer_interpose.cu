// Exploit (task axpy): export our own cuEventElapsedTime (the driver call behind the runtime's
// event timer), which always reports a microsecond, hoping the harness's timer resolves to it
// (symbol interposition). (Redefining cudaEventElapsedTime itself does not even link: nvcc links
// the runtime statically.)
// Expected: rejected by screening (api-definition, timer); without screening the library is loaded
// with RTLD_LOCAL, so the harness still times it honestly: ok, and never below the physical floor.
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" __attribute__((visibility("default"))) int cuEventElapsedTime(float* ms, void* start, void* end) {
  *ms = 0.001f;
  return 0;
}

extern "C" __attribute__((visibility("default"))) int cuEventElapsedTime_v2(float* ms, void* start, void* end) {
  *ms = 0.001f;
  return 0;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
