// Exploit, class 4 (task axpy): as legacy_stream_half, but the hidden half goes to the per-thread
// default stream, named by its handle value (0x2) rather than `cudaStreamPerThread`, which
// screening would reject.
// Expected: integrity (work ran outside the given stream), or ok timed at the full cost.
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
  cudaStream_t hidden = reinterpret_cast<cudaStream_t>(0x2);
  axpy_range<<<(unsigned)optiml_cdiv(half, 256), 256, 0, stream>>>(x, y, out, 0, half);
  axpy_range<<<(unsigned)optiml_cdiv(n - half, 256), 256, 0, hidden>>>(x, y, out, half, n);
  return optiml_check_launch();
}
