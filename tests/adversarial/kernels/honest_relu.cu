// Honest (task relu): max(x, 0) elementwise, on both the native and the signed inputs. Must be accepted.
#include "optiml.h"

__global__ void relu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  relu<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((const float*)inputs[0].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
