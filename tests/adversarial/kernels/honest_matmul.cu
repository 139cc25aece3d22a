// Honest (task matmul): shared-memory tiled SGEMM in exact fp32, any N. Must be accepted: it runs far
// above the compute floor (flops / the GPU's FP32 peak).
#include "optiml.h"

#define TILE 16

__global__ void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t n) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = blockIdx.y * (int64_t)TILE + ty, col = blockIdx.x * (int64_t)TILE + tx;
  float acc = 0.0f;
  for (int64_t t = 0; t < n; t += TILE) {
    as[ty][tx] = (row < n && t + tx < n) ? a[row * n + t + tx] : 0.0f;
    bs[ty][tx] = (t + ty < n && col < n) ? b[(t + ty) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(as[ty][k], bs[k][tx], acc);
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = acc;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t n = inputs[0].shape[0];
  dim3 block(TILE, TILE), grid((unsigned)optiml_cdiv(n, TILE), (unsigned)optiml_cdiv(n, TILE));
  matmul<<<grid, block, 0, stream>>>((const float*)inputs[0].data, (const float*)inputs[1].data,
                                     (float*)outputs[0].data, n);
  return optiml_check_launch();
}
