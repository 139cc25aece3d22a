// Exploit (task axpy): end the process from inside the call (a harness that treats a clean exit as
// success would record a pass).
// Expected: rejected by screening (process-exit); without screening, crash — the worker's death is
// caught and reported, and a fresh worker takes over.
#include "optiml.h"
#include <cstdlib>

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  exit(0);
}
