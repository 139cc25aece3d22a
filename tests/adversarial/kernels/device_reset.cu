// Exploit (task axpy): reset the device from inside the call, destroying the harness's context (its
// events, its reference outputs, its timer) along with any evidence.
// Expected: rejected by screening (device-control); without screening, runtime_error or crash.
#include "optiml.h"

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  cudaDeviceReset();
  return 0;
}
