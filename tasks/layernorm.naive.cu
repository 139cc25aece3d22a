// layernorm.naive.cu — naive OptiML baseline for tasks/layernorm.py: LayerNorm over the last
// dimension with elementwise affine,
//   y[r, j] = (x[r, j] - mean_r) * rsqrt(var_r + eps) * weight[j] + bias[j]   (biased variance).
// Inputs (ABI order): x, then the parameters in state_dict order: weight [N], bias [N].
//
// One thread per row makes three sequential passes over its row: the mean, the variance as the
// mean of squared deviations (two-pass, numerically safe), then the normalised affine output.
// Naive because adjacent threads touch addresses a whole row apart (uncoalesced), only `rows`
// threads exist, and the row is read three times. A fast version gives each row a warp or a
// block, keeps the row in registers/shared memory (or uses Welford / sum and sum-of-squares in a
// single pass), reads x, weight and bias with coalesced float4 loads and reduces with warp
// shuffles, so x is read once and y written once.
#include "optiml.h"

#include <math.h>

#define BLOCK_SIZE 128  // threads (rows) per block

static const float LN_EPS = 1e-5f;  // must match the Model's nn.LayerNorm eps (not a tuning knob)
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

// Each thread normalises whole rows (grid-stride over rows, so any row count works).
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                 const float* __restrict__ bias, float* __restrict__ y,
                                 int64_t rows, int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += xr[j];
    const float mean = sum / (float)n;
    float sq = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float d = xr[j] - mean;
      sq += d * d;
    }
    const float rstd = rsqrtf(sq / (float)n + LN_EPS);
    for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * rstd * weight[j] + bias[j];
  }
}

// Returns -1 for wrong argument counts, -2 for wrong dtypes, -3 for unexpected shapes/layouts.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != 3 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const optiml_tensor* w = &inputs[1];
  const optiml_tensor* b = &inputs[2];
  const optiml_tensor* y = &outputs[0];
  if (x->dtype != OPTIML_FLOAT32 || w->dtype != OPTIML_FLOAT32 || b->dtype != OPTIML_FLOAT32 ||
      y->dtype != OPTIML_FLOAT32)
    return -2;
  if (x->ndim < 1 || !same_shape(x, y) || !is_contiguous(x) || !is_contiguous(y)) return -3;
  const int64_t n = x->shape[x->ndim - 1];
  if (w->ndim != 1 || b->ndim != 1 || w->shape[0] != n || b->shape[0] != n || !is_contiguous(w) ||
      !is_contiguous(b))
    return -3;

  if (optiml_numel(x) == 0) return 0;
  const int64_t rows = optiml_numel(x) / n;
  const int64_t blocks = optiml_cdiv(rows, BLOCK_SIZE);
  const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
  layernorm_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (const float*)w->data,
                                                    (const float*)b->data, (float*)y->data, rows, n);
  return optiml_check_launch();
}
