// Honest (task rowsum): one warp per row, strided loads, shuffle reduction; any M and N. Must be accepted.
#include "optiml.h"

__global__ void rowsum(const float* __restrict__ x, float* __restrict__ out, int64_t m, int64_t n, int64_t pitch) {
  int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= m) return;
  const float* r = x + row * pitch;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += 32) s += r[j];
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t m = inputs[0].shape[0], n = inputs[0].shape[1];
  const int rows_per_block = 8;
  rowsum<<<(unsigned)optiml_cdiv(m, rows_per_block), rows_per_block * 32, 0, stream>>>(
      (const float*)inputs[0].data, (float*)outputs[0].data, m, n, inputs[0].stride[0]);
  return optiml_check_launch();
}
