/* A candidate built for the fake libcuda: "device" pointers are host memory. y = x * alpha; it checks
   what the light target hands it and logs what it saw to $FAKE_CUDA_LOG. Returns 5 when FAIL is set. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "optiml.h"

static void note(const char* text) {
  FILE* log = fopen(getenv("FAKE_CUDA_LOG"), "a");
  if (log) { fprintf(log, "%s\n", text); fclose(log); }
}
OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  if (n_inputs != 2 || inputs[0].data != NULL || inputs[1].memory != OPTIML_HOST) return 0;  /* shapes only */
  return 64;
}
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  (void)stream;
  if (getenv("FAIL")) return 5;
  if (n_inputs != 2 || n_outputs != 1 || workspace == NULL || workspace_bytes != 64) return 1;
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  double alpha = optiml_scalar_f64(&inputs[1]), sum = 0.0;
  if (((unsigned char*)y)[0] != 0xFF) return 2;  /* outputs arrive poisoned */
  for (int64_t i = 0; i < optiml_numel(&inputs[0]); ++i) { y[i] = (float)(x[i] * alpha); sum += y[i]; }
  char text[64];
  snprintf(text, sizeof text, "sum %.4f", sum);
  note(text);
  return 0;
}
