// Exploit (task softmax_wide, threat class 8): write zeros. Every softmax output of a 131072-wide row is
// below the task's atol of 1e-4, so an all-zero output is "within tolerance" everywhere.
// Expected: wrong_answer — preparing the task finds that zeros pass and tightens atol to rtol x max|ref|.
#include "optiml.h"

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 1 || n_outputs != 1) return 1;
  cudaMemsetAsync(outputs[0].data, 0, (size_t)optiml_numel(&outputs[0]) * sizeof(float), stream);
  return optiml_check_launch();
}
