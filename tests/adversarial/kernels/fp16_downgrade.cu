// Exploit (task axpy, float32 with a 1e-4 tolerance): compute in half precision, which is faster
// and about 5e-4 off.
// Expected: rejected by screening (precision, fp32-strict task); without screening, wrong_answer.
#include "optiml.h"
#include <cuda_fp16.h>

__global__ void axpy_in_half(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                             int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    __half r = __hfma(__float2half(2.5f), __float2half(x[i]), __float2half(y[i]));
    out[i] = __half2float(r);
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_in_half<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
