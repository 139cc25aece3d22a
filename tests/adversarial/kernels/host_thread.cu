// Exploit (task axpy): return immediately and do the work later from a detached host thread, so
// the call looks free.
// Expected: rejected by screening (threads); without screening, integrity (a thread left running)
// or wrong_answer (outputs not written when the harness looks).
#include "optiml.h"
#include <chrono>
#include <thread>

__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                     int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  float* out = (float*)outputs[0].data;
  int64_t n = optiml_numel(&inputs[0]);
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(x, y, out, n);
    cudaStreamSynchronize(stream);
  }).detach();
  return 0;
}
