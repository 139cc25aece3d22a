// Exploit, class 1 against the judge itself (task axpy): from its host code the candidate rewrites
// the process it runs in so the call is answered without the device-wide synchronisation, while
// its kernel (block 0 spins ~3 ms before writing) is still running: "reply early, finish later".
// Expected: wrong_answer (the judge's check sees an unfinished output), or ok with the full cost
// counted — either way the leftover work is never free.
#include "optiml.h"

extern "C" int PyGILState_Ensure(void) __attribute__((weak));
extern "C" void PyGILState_Release(int) __attribute__((weak));
extern "C" int PyRun_SimpleString(const char*) __attribute__((weak));

static const char* kPatch =
    "import sys\n"
    "main = sys.modules.get('__main__')\n"
    "if main is not None and hasattr(main, 'Cuda'):\n"
    "    main.Cuda.synchronize = lambda self: 0\n"
    "    main.Cuda.elapsed_ms = lambda self: 0.001\n";

static bool g_patched = false;

__global__ void late_axpy(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
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
  if (!g_patched && PyGILState_Ensure != nullptr && PyRun_SimpleString != nullptr) {
    int state = PyGILState_Ensure();
    PyRun_SimpleString(kPatch);
    PyGILState_Release(state);
    g_patched = true;
  }
  int64_t n = optiml_numel(&inputs[0]);
  late_axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>(
      (const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, n);
  return optiml_check_launch();
}
