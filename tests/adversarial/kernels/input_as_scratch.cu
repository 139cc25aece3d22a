// Exploit (task rowsum): reduce each row in place inside the input matrix (saving a workspace),
// then copy the row totals out. The answer is right; the input is destroyed.
// Expected: integrity — inputs must be unchanged after the call.
#include "optiml.h"

__global__ void fold_rows(float* x, int64_t pitch, int64_t live, int64_t width) {
  float* row = x + blockIdx.x * pitch;
  for (int64_t j = threadIdx.x; j < width && j + width < live; j += blockDim.x) row[j] += row[j + width];
}

__global__ void take_first(const float* __restrict__ x, float* __restrict__ out, int64_t m, int64_t n) {
  int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (row < m) out[row] = x[row * n];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t m = inputs[0].shape[0], n = inputs[0].shape[1];
  float* x = (float*)inputs[0].data;
  for (int64_t live = n; live > 1;) {
    int64_t width = (live + 1) / 2;
    fold_rows<<<(unsigned)m, 256, 0, stream>>>(x, n, live, width);
    live = width;
  }
  take_first<<<(unsigned)optiml_cdiv(m, 256), 256, 0, stream>>>(x, (float*)outputs[0].data, m, n);
  return optiml_check_launch();
}
