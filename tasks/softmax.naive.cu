// softmax.naive.cu — naive OptiML baseline for tasks/softmax.py: row softmax over the last
// dimension, y[r, j] = exp(x[r, j] - max_r) / sum_k exp(x[r, k] - max_r).
//
// One thread per row makes three sequential passes over its row: the row max (subtracted for
// numerical safety), the sum of expf(x - max), then writes expf(x - max) / sum. Naive because
// adjacent threads touch addresses a whole row apart (uncoalesced), there are only `rows` threads,
// the input is read three times from DRAM/L2 and exp is computed twice. A fast version gives each
// row a warp or a block, keeps the row in registers/shared memory (or uses an online softmax that
// tracks max and sum in one pass), reads with coalesced float4 loads and reduces with warp
// shuffles, so the input is read once and the output written once.
#include "optiml.h"

#include <math.h>
#include <math_constants.h>

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

static bool same_shape(const optiml_tensor* a, const optiml_tensor* b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

// Each thread processes whole rows (grid-stride over rows, so any row count works).
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                               int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float m = -CUDART_INF_F;
    for (int64_t j = 0; j < n; ++j) m = fmaxf(m, xr[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += expf(xr[j] - m);
    for (int64_t j = 0; j < n; ++j) yr[j] = expf(xr[j] - m) / s;
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
  if (x->ndim < 1 || !same_shape(x, y) || !is_contiguous(x) || !is_contiguous(y)) return -3;

  const int64_t n = x->shape[x->ndim - 1];
  if (optiml_numel(x) == 0) return 0;
  const int64_t rows = optiml_numel(x) / n;
  const int64_t blocks = optiml_cdiv(rows, BLOCK_SIZE);
  const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
  softmax_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (float*)y->data, rows, n);
  return optiml_check_launch();
}
