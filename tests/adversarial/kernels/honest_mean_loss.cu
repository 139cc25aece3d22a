// Honest (task mean_loss): grid-stride squared differences, block reduction, one double atomic per block
// into the workspace, then a one-thread kernel writes the mean. Must be accepted (perturbed inputs included).
#include "optiml.h"

__global__ void partial(const float* __restrict__ a, const float* __restrict__ b, double* __restrict__ total,
                        int64_t n) {
  __shared__ double block[256];
  double s = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float d = a[i] - b[i];
    s += (double)(d * d);
  }
  block[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) block[threadIdx.x] += block[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, block[0]);
}

__global__ void finish(const double* __restrict__ total, float* __restrict__ out, int64_t n) {
  out[0] = (float)(total[0] / (double)n);
}

extern "C" size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) { return sizeof(double); }

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1 || workspace_bytes < sizeof(double)) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  double* total = (double*)workspace;
  cudaMemsetAsync(total, 0, sizeof(double), stream);
  partial<<<264, 256, 0, stream>>>((const float*)inputs[0].data, (const float*)inputs[1].data, total, n);
  finish<<<1, 1, 0, stream>>>(total, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
