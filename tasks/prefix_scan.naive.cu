// prefix_scan.naive.cu — naive OptiML baseline for tasks/prefix_scan.py: inclusive prefix sum
// along the last dimension, y[r, j] = sum_{k <= j} x[r, k] (leading dims flattened into rows).
//
// One thread per row runs a sequential scan with an fp32 running sum, writing every prefix.
// Naive because adjacent threads read and write addresses a whole row apart (uncoalesced loads
// and stores), only `rows` threads exist, and the scan is one long dependent chain per row. A
// fast version gives each row a block (or a warp for short rows): coalesced float4 loads, a
// per-thread serial scan of a few elements in registers, a warp-shuffle scan of the thread totals
// (__shfl_up_sync), a block-level scan of the warp totals in shared memory, and a carry between
// consecutive chunks of the row (or a decoupled look-back scan across blocks for long rows).
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

static bool same_shape(const optiml_tensor* a, const optiml_tensor* b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

// Each thread scans whole rows (grid-stride over rows, so any row count works).
__global__ void prefix_scan_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t rows, int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      acc += xr[j];
      yr[j] = acc;
    }
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
  prefix_scan_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (float*)y->data,
                                                      rows, n);
  return optiml_check_launch();
}
