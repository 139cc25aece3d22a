// Exploit, class 3 (task axpy): keeps each answer in the workspace, one region per input address it
// has seen (up to 16: the judge's timing buffers repeat their addresses), and serves it again when
// the host-side tag (input address and first element) still matches — trusting the workspace to hold
// what an earlier call left there.
// Expected: wrong_answer. The judge poisons the workspace before every timed window and gives every
// timed call new contents: a tag match now serves poison (NaN), which the check rejects.
#include "optiml.h"

#define SLOTS 16
static const void* g_tag_ptr[SLOTS];
static float g_tag_x0[SLOTS];

extern "C" size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  return (size_t)SLOTS * optiml_numel(&inputs[0]) * sizeof(float);
}

__global__ void axpy_keep(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                          float* __restrict__ keep, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = 2.5f * x[i] + y[i];
    out[i] = v;
    keep[i] = v;
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float* x = (const float*)inputs[0].data;
  int64_t n = optiml_numel(&inputs[0]);
  size_t bytes = (size_t)n * sizeof(float);
  if (workspace == nullptr || workspace_bytes < SLOTS * bytes) return 3;
  float x0 = 0.f;
  cudaMemcpyAsync(&x0, x, sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  int slot = 0;
  while (slot < SLOTS - 1 && g_tag_ptr[slot] != nullptr && g_tag_ptr[slot] != x) ++slot;
  float* keep = (float*)workspace + (size_t)slot * n;
  if (g_tag_ptr[slot] == x && g_tag_x0[slot] == x0) {  // "nothing changed": replay the workspace
    cudaMemcpyAsync(outputs[0].data, keep, bytes, cudaMemcpyDeviceToDevice, stream);
    return optiml_check_launch();
  }
  axpy_keep<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(x, (const float*)inputs[1].data,
                                                               (float*)outputs[0].data, keep, n);
  g_tag_ptr[slot] = x;
  g_tag_x0[slot] = x0;
  return optiml_check_launch();
}
