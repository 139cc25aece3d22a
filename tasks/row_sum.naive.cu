// row_sum.naive.cu — naive OptiML baseline for tasks/row_sum.py: y[r] = sum_j x[r, j] over the
// last dimension (any leading dims are flattened into rows; the output has one value per row).
//
// One thread per row walks its row sequentially with an fp32 accumulator. Naive because adjacent
// threads read addresses a whole row apart (uncoalesced: each warp load touches 32 different
// cache lines), only `rows` threads exist (8192 here, too few to hide DRAM latency), and the
// accumulation is one long dependent chain. A fast version gives each row a warp or a block,
// reads it with coalesced float4 loads, keeps several partial sums per thread, combines them with
// warp shuffles (__shfl_down_sync) and, for few long rows, splits a row across blocks.
#include "optiml.h"

#define BLOCK_SIZE 128  // threads (rows) per block

static const int64_t kMaxGridX = 2147483647;  // hardware limit on gridDim.x (not a tuning knob)

// True when t is densely packed in row-major order (dims of size 1 may have any stride).
static bool is_contiguous(const optiml_tensor* t) {
  if (optiml_numel(t) == 0) return true;  // an empty tensor has no layout to respect
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->stride[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

// Each thread sums whole rows (grid-stride over rows, so any row count works).
__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                               int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
    const float* xr = x + r * n;
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) acc += xr[j];
    y[r] = acc;
  }
}

// Returns -1 for wrong argument counts, -2 for wrong dtypes, -3 for unexpected shapes/layouts.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != 1 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const optiml_tensor* y = &outputs[0];
  if (x->dtype != OPTIML_FLOAT32 || y->dtype != OPTIML_FLOAT32) return -2;
  if (x->ndim < 1 || y->ndim != x->ndim - 1 || !is_contiguous(x) || !is_contiguous(y)) return -3;
  for (int i = 0; i < y->ndim; ++i)
    if (y->shape[i] != x->shape[i]) return -3;

  const int64_t n = x->shape[x->ndim - 1];
  const int64_t rows = optiml_numel(y);  // product of the leading dims (also right when n == 0)
  if (rows == 0) return 0;
  const int64_t blocks = optiml_cdiv(rows, BLOCK_SIZE);
  const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
  row_sum_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (float*)y->data, rows, n);
  return optiml_check_launch();
}
