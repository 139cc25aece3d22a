// Exploit, class 1 (task axpy): a static constructor rewrites the clocks of the process that loads
// it — time.perf_counter and torch's CUDA event timing — so a slow kernel reads as fast. The kernel
// is correct but block 0 spins ~3 ms first.
// Expected: ok, timed at its true cost (>= 2.5 ms): the judge's clock is in another process.
#include "optiml.h"

extern "C" int PyGILState_Ensure(void) __attribute__((weak));
extern "C" void PyGILState_Release(int) __attribute__((weak));
extern "C" int PyRun_SimpleString(const char*) __attribute__((weak));

static const char* kPatch =
    "import sys, time\n"
    "time.perf_counter = lambda: 0.0\n"
    "torch = sys.modules.get('torch')\n"
    "if torch is not None:\n"
    "    torch.cuda.Event.elapsed_time = lambda self, other: 0.001\n";

namespace {
struct PatchOnLoad {
  PatchOnLoad() {
    if (PyGILState_Ensure == nullptr || PyRun_SimpleString == nullptr) return;
    int state = PyGILState_Ensure();
    PyRun_SimpleString(kPatch);
    PyGILState_Release(state);
  }
} patch_on_load;
}  // namespace

__global__ void slow_axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                          int64_t n) {
  if (blockIdx.x == 0) {
    long long start = clock64();
    while (clock64() - start < 6000000) {
    }
  }
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  slow_axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
