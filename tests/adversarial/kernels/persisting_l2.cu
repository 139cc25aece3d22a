// Exploit (task axpy): reserve a persisting-L2 carve-out and pin the first input in it through the
// stream's access-policy window, so timed calls find it hot despite the harness's L2 flush.
// Expected: rejected by screening (l2-persistence); without screening, integrity (the harness finds
// the carve-out raised after the call).
#include "optiml.h"

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  // Within what this GPU allows (an H100 refuses a window the H200 takes): the exploit must work to be judged.
  int device = 0, max_window = 0, max_persisting = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device);
  cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, device);
  size_t window = (size_t)n * sizeof(float);
  if (window > ((size_t)32 << 20)) window = (size_t)32 << 20;
  if (max_window > 0 && window > (size_t)max_window) window = (size_t)max_window;
  if (max_persisting > 0 && window > (size_t)max_persisting) window = (size_t)max_persisting;
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, window);
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = inputs[0].data;
  attr.accessPolicyWindow.num_bytes = window;
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
