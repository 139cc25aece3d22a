// Exact (erf) GELU, elementwise: out = 0.5 x (1 + erf(x / sqrt 2)), as torch.nn.functional.gelu computes it.
#include "optiml.h"

__global__ void gelu(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  gelu<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((const float*)inputs[0].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
