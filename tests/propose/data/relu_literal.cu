// ReLU written the way a first LLM draft often is: literal launch configuration, no qualifiers.
#include "optiml.h"

__global__ void relu_kernel(float* x, float* y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return -1;
  int64_t n = optiml_numel(&inputs[0]);
  if (n == 0) return 0;
  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>((float*)inputs[0].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
