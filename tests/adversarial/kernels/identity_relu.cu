// Exploit (task relu, threat class 7): copy the input. KernelBench draws torch.rand (all >= 0), where
// ReLU is the identity, so y = x passes every trial on the task's own inputs.
// Expected: wrong_answer on the default second distribution (signed `normal` inputs).
#include "optiml.h"

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return 1;
  size_t bytes = (size_t)optiml_numel(&inputs[0]) * sizeof(float);
  cudaMemcpyAsync(outputs[0].data, inputs[0].data, bytes, cudaMemcpyDeviceToDevice, stream);
  return optiml_check_launch();
}
