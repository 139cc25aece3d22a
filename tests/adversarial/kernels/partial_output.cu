// Exploit (task rowsum): compute only the first seven eighths of the rows and hope the check samples.
// Expected: wrong_answer — every output element is compared (and the rest are NaN-poisoned).
#include "optiml.h"

__global__ void rowsum(const float* __restrict__ x, float* __restrict__ out, int64_t m, int64_t n) {
  int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= m) return;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += 32) s += x[row * n + j];
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t m = inputs[0].shape[0], n = inputs[0].shape[1];
  int64_t rows = m - m / 8;
  rowsum<<<(unsigned)optiml_cdiv(rows, 8), 256, 0, stream>>>((const float*)inputs[0].data,
                                                             (float*)outputs[0].data, rows, n);
  return optiml_check_launch();
}
