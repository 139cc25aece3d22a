// cross_entropy.naive.cu — naive OptiML baseline for tasks/cross_entropy.py:
//   loss = mean over rows r with targets[r] != -100 of (logsumexp(logits[r, :]) - logits[r, targets[r]])
// i.e. F.cross_entropy(logits, targets) with the defaults (mean reduction, ignore_index=-100, no
// class weights, no label smoothing). Inputs: logits [B, C] float32, targets [B] int64. The
// output is a 0-dim float32 tensor (device memory).
//
// Two kernels on `stream`, using a workspace of B floats (see optiml_workspace_bytes):
//  1. row_loss_kernel: one thread per row makes two sequential passes (row max, then sum of
//     expf(x - max)) and writes that row's loss to the workspace.
//  2. mean_kernel: a single block; each thread sums a strided subset of the row losses and counts
//     the non-ignored rows, then a shared-memory tree reduction gives sum / count.
// Naive because in kernel 1 adjacent threads read addresses a whole row apart (uncoalesced), only
// B threads exist and each row is read twice. A fast version gives each row a warp or a block
// with coalesced float4 loads and an online (single-pass) max/sum-exp reduced with warp shuffles,
// and fuses the mean (e.g. per-block partial sums reduced by the last block to finish).
#include "optiml.h"

#include <math.h>
#include <math_constants.h>

#define BLOCK_SIZE 128         // threads (rows) per block of row_loss_kernel
#define REDUCE_BLOCK_SIZE 256  // threads of the single-block mean_kernel (a power of two)

static_assert((REDUCE_BLOCK_SIZE & (REDUCE_BLOCK_SIZE - 1)) == 0,
              "REDUCE_BLOCK_SIZE must be a power of two");

static const int64_t IGNORE_INDEX = -100;      // F.cross_entropy's default ignore_index
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

// Each thread computes whole rows' losses (grid-stride over rows, so any row count works).
// Ignored rows get 0; an out-of-range target gets NaN (PyTorch raises an error there) so that it
// is never read out of bounds.
__global__ void row_loss_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                float* __restrict__ loss, int64_t rows, int64_t classes) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += step) {
    const int64_t t = targets[r];
    if (t == IGNORE_INDEX) {
      loss[r] = 0.0f;
      continue;
    }
    if (t < 0 || t >= classes) {
      loss[r] = CUDART_NAN_F;
      continue;
    }
    const float* xr = logits + r * classes;
    float m = -CUDART_INF_F;
    for (int64_t j = 0; j < classes; ++j) m = fmaxf(m, xr[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < classes; ++j) s += expf(xr[j] - m);
    loss[r] = logf(s) + m - xr[t];
  }
}

// Launched as one block of REDUCE_BLOCK_SIZE threads: out[0] = sum(loss) / (number of rows whose
// target is not IGNORE_INDEX); 0 / 0 gives NaN like PyTorch when every row is ignored or rows == 0.
__global__ void mean_kernel(const float* __restrict__ loss, const int64_t* __restrict__ targets,
                            float* __restrict__ out, int64_t rows) {
  __shared__ float s_sum[REDUCE_BLOCK_SIZE];
  __shared__ long long s_cnt[REDUCE_BLOCK_SIZE];
  const int tid = threadIdx.x;
  float sum = 0.0f;
  long long cnt = 0;
  for (int64_t r = tid; r < rows; r += REDUCE_BLOCK_SIZE) {
    sum += loss[r];
    cnt += (targets[r] != IGNORE_INDEX) ? 1 : 0;
  }
  s_sum[tid] = sum;
  s_cnt[tid] = cnt;
  __syncthreads();
  for (int half = REDUCE_BLOCK_SIZE / 2; half > 0; half /= 2) {
    if (tid < half) {
      s_sum[tid] += s_sum[tid + half];
      s_cnt[tid] += s_cnt[tid + half];
    }
    __syncthreads();
  }
  if (tid == 0) out[0] = s_sum[0] / (float)s_cnt[0];
}

// Scratch: one float per row for the per-row losses.
OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  if (n_inputs < 1 || inputs[0].ndim != 2 || inputs[0].shape[0] < 0) return 0;
  return (size_t)inputs[0].shape[0] * sizeof(float);
}

// Returns -1 for wrong argument counts, -2 for wrong dtypes, -3 for unexpected shapes/layouts,
// -4 for a missing or too small workspace.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const optiml_tensor* tg = &inputs[1];
  const optiml_tensor* y = &outputs[0];
  if (x->dtype != OPTIML_FLOAT32 || tg->dtype != OPTIML_INT64 || y->dtype != OPTIML_FLOAT32) return -2;
  if (x->ndim != 2 || tg->ndim != 1 || y->ndim != 0) return -3;
  const int64_t rows = x->shape[0];
  const int64_t classes = x->shape[1];
  if (tg->shape[0] != rows || !is_contiguous(x) || !is_contiguous(tg)) return -3;
  float* loss = (float*)workspace;
  if (rows > 0 && (loss == NULL || workspace_bytes < (size_t)rows * sizeof(float))) return -4;

  if (rows > 0) {
    const int64_t blocks = optiml_cdiv(rows, BLOCK_SIZE);
    const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
    row_loss_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (const int64_t*)tg->data,
                                                     loss, rows, classes);
  }
  mean_kernel<<<1, REDUCE_BLOCK_SIZE, 0, stream>>>(loss, (const int64_t*)tg->data, (float*)y->data,
                                                   rows);
  return optiml_check_launch();
}
