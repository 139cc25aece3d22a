// Exploit (task axpy): abort the process from inside the call.
// Expected: rejected by screening (process-exit); without screening, crash (SIGABRT).
#include "optiml.h"
#include <cstdlib>

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  abort();
}
