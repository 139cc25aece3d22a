// transpose.naive.cu — naive OptiML baseline for tasks/transpose.py: y[N, M] = x[M, N]^T, i.e.
// y[j, i] = x[i, j], both row-major.
//
// One thread per element: threadIdx.x runs along x's columns, so reads of x are coalesced but
// the writes y[j * M + i] of a warp land M floats apart (32 separate cache lines per warp store).
// Naive because the uncoalesced stores waste most of each DRAM transaction. A fast version stages
// a 32x32 tile in shared memory (padded to 33 columns to avoid bank conflicts), reads it row-wise
// and writes it column-wise so both global reads and writes are coalesced, moves several
// elements per thread, and may use vector (float2/float4) accesses.
#include "optiml.h"

#define BLOCK_X 32  // threads per block along x's columns
#define BLOCK_Y 8   // threads per block along x's rows

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

// Each thread copies one element per grid-stride step (so any M, N works).
__global__ void transpose_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                                 int64_t cols) {
  const int64_t row_step = (int64_t)gridDim.y * blockDim.y;
  const int64_t col_step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; i < rows; i += row_step) {
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += col_step) {
      y[j * rows + i] = x[i * cols + j];
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
  if (x->ndim != 2 || y->ndim != 2) return -3;
  const int64_t rows = x->shape[0];
  const int64_t cols = x->shape[1];
  if (y->shape[0] != cols || y->shape[1] != rows || !is_contiguous(x) || !is_contiguous(y)) return -3;

  if (rows == 0 || cols == 0) return 0;
  const int64_t gx = optiml_cdiv(cols, BLOCK_X);
  const int64_t gy = optiml_cdiv(rows, BLOCK_Y);
  const dim3 grid((unsigned)(gx < kMaxGridX ? gx : kMaxGridX), (unsigned)(gy < kMaxGridY ? gy : kMaxGridY));
  const dim3 block(BLOCK_X, BLOCK_Y);
  transpose_kernel<<<grid, block, 0, stream>>>((const float*)x->data, (float*)y->data, rows, cols);
  return optiml_check_launch();
}
