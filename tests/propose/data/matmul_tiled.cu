// Shared-memory tiled SGEMM C = A @ B (row-major), one output element per thread.
#include "optiml.h"

constexpr int TILE = 16;  // tile edge: TILE x TILE threads, two TILE x TILE shared tiles

__global__ void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[(int64_t)row * k + t + threadIdx.x] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(int64_t)(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < TILE; ++i) {
      acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    }
    __syncthreads();
  }
  if (row < m && col < n) c[(int64_t)row * n + col] = acc;
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1) return -1;
  const int m = (int)inputs[0].shape[0], k = (int)inputs[0].shape[1], n = (int)inputs[1].shape[1];
  dim3 block(TILE, TILE);
  dim3 grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
  matmul_tiled<<<grid, block, 0, stream>>>((const float*)inputs[0].data, (const float*)inputs[1].data,
                                           (float*)outputs[0].data, m, n, k);
  return optiml_check_launch();
}
