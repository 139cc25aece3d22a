// y = 2 * x done as a copy then an in-place scale: the second launch aliases its two pointers.
#include "optiml.h"

__global__ void copy_kernel(const float* src, float* dst, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

__global__ void scale_kernel(float* in, float* out, float alpha, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * in[i];
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return -1;
  const int64_t n = optiml_numel(&inputs[0]);
  if (n == 0) return 0;
  const int threads = 128;
  const int64_t blocks = optiml_cdiv(n, threads);
  float* y = (float*)outputs[0].data;
  copy_kernel<<<blocks, threads, 0, stream>>>((const float*)inputs[0].data, y, n);
  scale_kernel<<<blocks, threads, 0, stream>>>(y, y, 2.0f, n);
  return optiml_check_launch();
}
