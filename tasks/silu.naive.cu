// silu.naive.cu — naive OptiML baseline for tasks/silu.py: y = x * sigmoid(x), elementwise.
//
// Each thread handles one element at a time (grid-stride loop, so any size works): one scalar
// 4-byte load, y = x / (1 + expf(-x)), one scalar 4-byte store. The op is memory bound (8 bytes
// moved per element, ~4 flops). Naive because scalar accesses issue 4x more memory instructions
// than 16-byte ones and each thread has a single load in flight. A fast version uses float4
// (16-byte) loads/stores with a scalar tail, several independent elements per thread for
// memory-level parallelism, and a grid of a few waves over the SMs.
#include "optiml.h"

#include <math.h>

#define BLOCK_SIZE 256  // threads per block

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

// One element per thread per grid-stride step.
__global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const float v = x[i];
    y[i] = v / (1.0f + expf(-v));
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

  const int64_t n = optiml_numel(x);
  if (n == 0) return 0;
  const int64_t blocks = optiml_cdiv(n, BLOCK_SIZE);
  const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
  silu_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (float*)y->data, n);
  return optiml_check_launch();
}
