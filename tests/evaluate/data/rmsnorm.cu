// RMS norm over dim 1 of a (B, F, H, W) float32 tensor, as KernelBench's 36_RMSNorm_ computes it:
// out = x / sqrt(mean(x^2 over F) + eps). One thread per (b, h, w), looping over F (coalesced over w).
#include "optiml.h"

__global__ void rmsnorm(const float* __restrict__ x, float* __restrict__ out, int64_t batch, int64_t features,
                        int64_t plane, float eps) {
  int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (index >= batch * plane) return;
  int64_t b = index / plane, p = index % plane;
  const float* base = x + b * features * plane + p;
  float sum = 0.0f;
  for (int64_t f = 0; f < features; ++f) sum = fmaf(base[f * plane], base[f * plane], sum);
  float inv = rsqrtf(sum / (float)features + eps);
  float* dst = out + b * features * plane + p;
  for (int64_t f = 0; f < features; ++f) dst[f * plane] = base[f * plane] * inv;
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 4) return 1;
  int64_t batch = inputs[0].shape[0], features = inputs[0].shape[1];
  int64_t plane = inputs[0].shape[2] * inputs[0].shape[3];
  int64_t threads = batch * plane;
  rmsnorm<<<(unsigned)optiml_cdiv(threads, 256), 256, 0, stream>>>((const float*)inputs[0].data,
                                                                    (float*)outputs[0].data, batch, features, plane,
                                                                    1e-5f);
  return optiml_check_launch();
}
