// Honest (task softmax_wide): one block per row, max then sum of exp by block reductions, then the
// normalised exponentials. Must be accepted under the tightened (magnitude-relative) tolerance.
#include "optiml.h"

#define THREADS 1024

__device__ float block_reduce(float v, bool take_max, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : (take_max ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset >>= 1) {
      float other = __shfl_down_sync(0xffffffffu, v, offset);
      v = take_max ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ out, int64_t d) {
  __shared__ float scratch[32];
  const float* row = x + blockIdx.x * d;
  float* dst = out + blockIdx.x * d;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_reduce(m, true, scratch);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += expf(row[j] - m);
  s = block_reduce(s, false, scratch);
  const float inv = 1.0f / s;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dst[j] = expf(row[j] - m) * inv;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t rows = inputs[0].shape[0], d = inputs[0].shape[1];
  if (rows == 0) return 0;
  softmax_rows<<<(unsigned)rows, THREADS, 0, stream>>>((const float*)inputs[0].data, (float*)outputs[0].data, d);
  return optiml_check_launch();
}
