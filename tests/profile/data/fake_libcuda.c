/* A host-memory stand-in for the few libcuda.so.1 calls light_target.py makes, so its protocol runs
   on a machine without a GPU: "device" memory is malloc'd, launches are logged to $FAKE_CUDA_LOG. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note(const char* what) {
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* log = path ? fopen(path, "a") : NULL;
  if (log) { fprintf(log, "%s\n", what); fclose(log); }
}
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void** context, int device) { (void)device; *context = (void*)1; return 0; }
int cuCtxSetCurrent(void* context) { (void)context; return 0; }
int cuDeviceGetName(char* name, int length, int device) { (void)device; snprintf(name, length, "Fake GPU"); return 0; }
int cuMemAlloc_v2(uint64_t* pointer, size_t size) { *pointer = (uint64_t)(uintptr_t)calloc(1, size); return 0; }
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t size) { memcpy((void*)(uintptr_t)dst, src, size); return 0; }
int cuMemsetD8_v2(uint64_t dst, unsigned char value, size_t size) { memset((void*)(uintptr_t)dst, value, size); return 0; }
int cuStreamCreate(void** stream, unsigned flags) { (void)flags; *stream = (void*)2; return 0; }
int cuModuleLoadData(void** module, const void* image) {
  *module = (void*)3;
  return strstr((const char*)image, ".entry optiml_profile_marker") ? 0 : 218;  /* CUDA_ERROR_INVALID_PTX */
}
int cuModuleGetFunction(void** function, void* module, const char* name) {
  (void)module; *function = (void*)4; return strcmp(name, "optiml_profile_marker") ? 500 : 0;
}
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void* stream, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)stream; (void)params;
  (void)extra; note("marker"); return 0;
}
int cuCtxSynchronize(void) { return 0; }
int cuProfilerStart(void) { note("start"); return 0; }
int cuProfilerStop(void) { note("stop"); return 0; }
