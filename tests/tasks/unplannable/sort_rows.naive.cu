// sort_rows.naive.cu — naive OptiML baseline for sort_rows.py: y[r, :] = sort(x[r, :]) ascending, NaN last.
//
// One thread per row: copy the row, then insertion sort in place (O(N^2) per row, uncoalesced).
#include "optiml.h"

__device__ __forceinline__ bool after(float a, float b) { return a > b || (a != a && b == b); }

__global__ void sort_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n) {
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * n;
  float* yr = y + r * n;
  for (int64_t j = 0; j < n; ++j) {
    const float v = xr[j];
    int64_t i = j;
    while (i > 0 && after(yr[i - 1], v)) {
      yr[i] = yr[i - 1];
      --i;
    }
    yr[i] = v;
  }
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != 1 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const optiml_tensor* y = &outputs[0];
  if (x->dtype != OPTIML_FLOAT32 || y->dtype != OPTIML_FLOAT32 || x->ndim != 2 || y->ndim != 2) return -2;
  const int64_t rows = x->shape[0], n = x->shape[1];
  if (rows <= 0 || n <= 0) return 0;
  sort_rows_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>((const float*)x->data, (float*)y->data,
                                                                       rows, n);
  return optiml_check_launch();
}
