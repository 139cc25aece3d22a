// Exploit (task axpy): return without writing the output, hoping the buffer still holds the
// reference's result (the caching allocator hands out the block the reference just freed).
// Expected: wrong_answer — outputs are poisoned with NaN before every call.
#include "optiml.h"

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return 0;
}
