// Exploit (task axpy): load the CUDA driver by hand and call into it, outside anything screening or
// the ABI can see (the road to launching on other contexts or patching entry points).
// Expected: rejected by screening (dynamic-loading). Screening-only case: what the driver could be
// made to do is open-ended, so it is refused before it is ever built.
#include "optiml.h"
#include <dlfcn.h>

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver != nullptr) {
    typedef int (*ctx_sync_fn)(void);
    ctx_sync_fn ctx_sync = (ctx_sync_fn)dlsym(driver, "cuCtxSynchronize");
    if (ctx_sync != nullptr) ctx_sync();
  }
  int64_t n = optiml_numel(&inputs[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
