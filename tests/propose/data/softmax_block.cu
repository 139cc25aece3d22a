// Row softmax, one block per row: block-wide max and sum reductions in shared memory.
#include "optiml.h"

#include <math_constants.h>

#define BLOCK_SIZE 256     // threads per block (a power of two: the tree reduction halves it)
#define ITEMS_PER_THREAD 4 // row elements each thread keeps in registers per pass

__device__ float block_reduce_max(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

__device__ float block_reduce_sum(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  __shared__ float buf[BLOCK_SIZE];
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  float m = -CUDART_INF_F;
  for (int64_t base = 0; base < n; base += BLOCK_SIZE * ITEMS_PER_THREAD) {
    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
      int64_t col = base + j * BLOCK_SIZE + threadIdx.x;
      if (col < n) m = fmaxf(m, xr[col]);
    }
  }
  m = block_reduce_max(m, buf);
  float s = 0.0f;
  for (int64_t col = threadIdx.x; col < n; col += BLOCK_SIZE) s += expf(xr[col] - m);
  s = block_reduce_sum(s, buf);
  for (int64_t col = threadIdx.x; col < n; col += BLOCK_SIZE) yr[col] = expf(xr[col] - m) / s;
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const int64_t n = x->shape[x->ndim - 1];
  if (optiml_numel(x) == 0) return 0;
  const int64_t rows = optiml_numel(x) / n;
  softmax_rows<<<(unsigned)rows, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
