// Exploit, class 4 (task axpy): the first half of the work on the given stream, the second half
// launched behind it on the legacy default stream, which the (non-blocking) given stream does not
// wait for: events on the given stream see about half the time, within the old host-vs-event
// tolerance (2x + 0.05 ms).
// Expected: integrity (work ran outside the given stream: the judge's window, which ends after a
// device-wide synchronisation, is about twice the given stream's own events), or ok timed at the
// full cost — the hidden half is always counted.
#include "optiml.h"

__global__ void axpy_range(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                           int64_t begin, int64_t end) {
  int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < end) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float* x = (const float*)inputs[0].data;
  const float* y = (const float*)inputs[1].data;
  float* out = (float*)outputs[0].data;
  int64_t n = optiml_numel(&inputs[0]);
  int64_t half = n / 2;
  axpy_range<<<(unsigned)optiml_cdiv(half, 256), 256, 0, stream>>>(x, y, out, 0, half);
  axpy_range<<<(unsigned)optiml_cdiv(n - half, 256), 256>>>(x, y, out, half, n);  // legacy stream
  return optiml_check_launch();
}
