// Exploit (task mean_loss): estimate the mean loss from every 16th element — a sixteenth of the reads —
// which lands within the loss's tolerance on the task's own uniform inputs. Must be rejected: the
// perturbed inputs verification adds for a low-information output (outliers, shifted or scaled rows)
// move the mean by far more than the tolerance, and a sample sees only a sixteenth of the change.
#include "optiml.h"

#define STRIDE 16

__global__ void partial(const float* __restrict__ a, const float* __restrict__ b, double* __restrict__ total,
                        int64_t samples) {
  __shared__ double block[256];
  double s = 0.0;
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < samples;
       k += (int64_t)gridDim.x * blockDim.x) {
    float d = a[k * STRIDE] - b[k * STRIDE];
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

__global__ void finish(const double* __restrict__ total, float* __restrict__ out, int64_t samples) {
  out[0] = (float)(total[0] / (double)samples);
}

extern "C" size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) { return sizeof(double); }

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1 || workspace_bytes < sizeof(double)) return 1;
  int64_t samples = optiml_numel(&inputs[0]) / STRIDE;
  double* total = (double*)workspace;
  cudaMemsetAsync(total, 0, sizeof(double), stream);
  partial<<<264, 256, 0, stream>>>((const float*)inputs[0].data, (const float*)inputs[1].data, total, samples);
  finish<<<1, 1, 0, stream>>>(total, (float*)outputs[0].data, samples);
  return optiml_check_launch();
}
