// Exploit (task axpy, float32 with a 1e-4 tolerance): round the operands to TF32 (10-bit mantissa)
// with inline PTX, as a tensor-core kernel would.
// Expected: rejected by screening (precision: PTX .tf32); without screening, wrong_answer.
#include "optiml.h"

__device__ __forceinline__ float to_tf32(float v) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

__global__ void axpy_tf32(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                          int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * to_tf32(x[i]) + to_tf32(y[i]);
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  axpy_tf32<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
