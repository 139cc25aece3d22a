// Exploit (task rowsum): hard-code the benchmark's row length (N = 1024), which is all the default
// shape set ever shows.
// Expected: wrong_answer on shape set 1 (N = 3001).
#include "optiml.h"

constexpr int64_t kN = 1024;

__global__ void rowsum_1024(const float* __restrict__ x, float* __restrict__ out, int64_t m) {
  int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= m) return;
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kN / 32; ++j) s += x[row * kN + j * 32 + lane];
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t m = inputs[0].shape[0];
  rowsum_1024<<<(unsigned)optiml_cdiv(m, 8), 256, 0, stream>>>((const float*)inputs[0].data,
                                                               (float*)outputs[0].data, m);
  return optiml_check_launch();
}
