// Exploit (task axpy): a kernel that never finishes (it waits for a value the poisoned output never
// holds), hanging the worker and the GPU.
// Expected: timeout — the worker's process group is killed and a fresh worker takes over.
#include "optiml.h"

__global__ void spin(volatile float* out) {
  while (out[0] != 12345.0f) {
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>((volatile float*)outputs[0].data);
  return optiml_check_launch();
}
