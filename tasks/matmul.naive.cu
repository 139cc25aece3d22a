// matmul.naive.cu — naive OptiML baseline for tasks/matmul.py: C[M, N] = A[M, K] @ B[K, N], fp32,
// all row-major.
//
// One thread per output element C[row, col] runs the full K loop straight from global memory
// (threadIdx.x runs along columns, so a warp's B loads are coalesced and its A load is a
// broadcast). Naive because there is no data reuse beyond what L1/L2 catch: every FMA needs two
// loads (arithmetic intensity ~0.25 flop/byte), so the kernel is load/latency bound far below the
// fp32 FMA peak. A fast version stages BMxBK tiles of A and BKxBN tiles of B in shared memory,
// has each thread compute a TMxTN register micro-tile (outer products from shared memory), uses
// vectorised float4 loads, double-buffered (cp.async) tile loads, and swizzled block order for L2
// reuse. Tensor cores only with fp32-accurate schemes (e.g. 3xTF32): plain TF32 fails the tolerance.
#include "optiml.h"

#define BLOCK_X 32  // threads per block along N (columns of C)
#define BLOCK_Y 8   // threads per block along M (rows of C)

static const int64_t kMaxGridX = 2147483647;  // hardware limit on gridDim.x (not a tuning knob)
static const int64_t kMaxGridY = 65535;       // hardware limit on gridDim.y (not a tuning knob)

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

// Each thread computes one C element per grid-stride step (so any M, N works).
__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ c, int64_t m, int64_t n, int64_t k) {
  const int64_t row_step = (int64_t)gridDim.y * blockDim.y;
  const int64_t col_step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; row < m; row += row_step) {
    for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < n; col += col_step) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
      c[row * n + col] = acc;
    }
  }
}

// Returns -1 for wrong argument counts, -2 for wrong dtypes, -3 for unexpected shapes/layouts.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != 2 || n_outputs != 1) return -1;
  const optiml_tensor* a = &inputs[0];
  const optiml_tensor* b = &inputs[1];
  const optiml_tensor* c = &outputs[0];
  if (a->dtype != OPTIML_FLOAT32 || b->dtype != OPTIML_FLOAT32 || c->dtype != OPTIML_FLOAT32)
    return -2;
  if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2) return -3;
  const int64_t m = a->shape[0];
  const int64_t k = a->shape[1];
  const int64_t n = b->shape[1];
  if (b->shape[0] != k || c->shape[0] != m || c->shape[1] != n) return -3;
  if (!is_contiguous(a) || !is_contiguous(b) || !is_contiguous(c)) return -3;

  if (m == 0 || n == 0) return 0;
  const int64_t gx = optiml_cdiv(n, BLOCK_X);
  const int64_t gy = optiml_cdiv(m, BLOCK_Y);
  const dim3 grid((unsigned)(gx < kMaxGridX ? gx : kMaxGridX), (unsigned)(gy < kMaxGridY ? gy : kMaxGridY));
  const dim3 block(BLOCK_X, BLOCK_Y);
  matmul_kernel<<<grid, block, 0, stream>>>((const float*)a->data, (const float*)b->data,
                                            (float*)c->data, m, n, k);
  return optiml_check_launch();
}
