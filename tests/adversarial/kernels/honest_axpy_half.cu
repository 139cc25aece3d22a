// Honest (task axpy_half): half-precision inputs and output are the task's dtype, so __half is
// allowed here (screening's precision rule applies to fp32-strict tasks only). Must be accepted.
#include "optiml.h"
#include <cuda_fp16.h>

__global__ void axpy_half(const __half* __restrict__ x, const __half* __restrict__ y, __half* __restrict__ out,
                          int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half(2.5f * __half2float(x[i]) + __half2float(y[i]));
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != OPTIML_FLOAT16) return 1;
  int64_t n = optiml_numel(&inputs[0]);
  axpy_half<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const __half*)inputs[0].data, (const __half*)inputs[1].data, (__half*)outputs[0].data, n);
  return optiml_check_launch();
}
