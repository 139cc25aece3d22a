// Honest (task rowsum): two passes through the harness-provided workspace — per-chunk partial sums,
// then a warp per row adds them up. Exercises optiml_workspace_bytes and several launches on one
// stream. Must be accepted.
#include "optiml.h"

#define CHUNK 256

static int64_t chunks_of(const optiml_tensor* x) { return optiml_cdiv(x->shape[1], CHUNK); }

__global__ void partial_sums(const float* __restrict__ x, float* __restrict__ partial, int64_t n, int64_t pitch,
                             int64_t chunks) {
  __shared__ float warp_sums[CHUNK / 32];
  int64_t row = blockIdx.y, chunk = blockIdx.x;
  int64_t j = chunk * CHUNK + threadIdx.x;
  float v = j < n ? x[row * pitch + j] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < CHUNK / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0) partial[row * chunks + chunk] = v;
  }
}

__global__ void finish(const float* __restrict__ partial, float* __restrict__ out, int64_t m, int64_t chunks) {
  int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (row >= m) return;
  float s = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) s += partial[row * chunks + c];
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
  if (lane == 0) out[row] = s;
}

extern "C" size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  return (size_t)(inputs[0].shape[0] * chunks_of(&inputs[0])) * sizeof(float);
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t m = inputs[0].shape[0], n = inputs[0].shape[1], chunks = chunks_of(&inputs[0]);
  if (workspace == NULL || workspace_bytes < (size_t)(m * chunks) * sizeof(float)) return 2;
  float* partial = (float*)workspace;
  partial_sums<<<dim3((unsigned)chunks, (unsigned)m), CHUNK, 0, stream>>>(
      (const float*)inputs[0].data, partial, n, inputs[0].stride[0], chunks);
  finish<<<(unsigned)optiml_cdiv(m, 8), 256, 0, stream>>>(partial, (float*)outputs[0].data, m, chunks);
  return optiml_check_launch();
}
