// Honest and legitimately very fast (task axpy): 16-byte vector loads and stores, close to HBM
// bandwidth, with a scalar tail for lengths that are not a multiple of 4 and a scalar fallback for
// misaligned buffers. Must be accepted: fast is fine when it is real.
#include "optiml.h"

__global__ void axpy_vec4(const float4* __restrict__ x, const float4* __restrict__ y, float4* __restrict__ out,
                          int64_t n4) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 a = __ldg(&x[i]);
    float4 b = __ldg(&y[i]);
    out[i] = make_float4(2.5f * a.x + b.x, 2.5f * a.y + b.y, 2.5f * a.z + b.z, 2.5f * a.w + b.w);
  }
}

__global__ void axpy_scalar(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                            int64_t start, int64_t n) {
  int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

static bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  float* out = (float*)outputs[0].data;
  int64_t n = optiml_numel(&inputs[0]);
  const int threads = 256;
  int64_t start = 0;
  if (aligned16(x) && aligned16(y) && aligned16(out)) {
    int64_t n4 = n / 4;
    if (n4 > 0) {
      axpy_vec4<<<(unsigned)optiml_cdiv(n4, threads), threads, 0, stream>>>(
          (const float4*)x, (const float4*)y, (float4*)out, n4);
    }
    start = n4 * 4;
  }
  if (start < n) {
    axpy_scalar<<<(unsigned)optiml_cdiv(n - start, threads), threads, 0, stream>>>(x, y, out, start, n);
  }
  return optiml_check_launch();
}
