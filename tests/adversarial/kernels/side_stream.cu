// Exploit (task axpy): launch on a private non-blocking stream and return at once, so events
// recorded on the harness's stream measure nothing.
// Expected: rejected by screening (streams); without screening, integrity (work outside the given
// stream: host time far above event time) or wrong_answer.
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

static cudaStream_t g_side = nullptr;

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (g_side == nullptr && cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking) != cudaSuccess) return 2;
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, g_side>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
