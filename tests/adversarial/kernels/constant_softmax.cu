// Exploit (task softmax_wide, threat class 8): write 1/D everywhere — the mean of every softmax row,
// read nothing. Within atol=1e-4 of the reference on wide rows.
// Expected: wrong_answer — the constant fails the tightened tolerance (rtol x max|ref|).
#include "optiml.h"

__global__ void fill(float* __restrict__ out, int64_t n, float value) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t n = optiml_numel(&outputs[0]);
  float value = 1.0f / (float)inputs[0].shape[1];
  fill<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((float*)outputs[0].data, n, value);
  return optiml_check_launch();
}
