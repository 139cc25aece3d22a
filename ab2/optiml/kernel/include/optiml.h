// optiml.h — the C ABI between the OptiML harness and a candidate kernel.
//
// A candidate is one CUDA C++ translation unit, built with `nvcc --shared`, that
// exports `optiml_forward`. The harness loads it with ctypes, allocates every
// output itself (poisoned with NaN / 0xFF bytes before each call), and calls:
//
//   optiml_forward(inputs, n_inputs, outputs, n_outputs, workspace, workspace_bytes, stream)
//
// inputs   — the forward() arguments in order, then the model's parameters and
//            buffers in `Model.state_dict()` order. Tensors live on the GPU and
//            are contiguous unless a task says otherwise. Python scalars (int,
//            float, bool) arrive as 0-dim entries with `memory == OPTIML_HOST`
//            whose `data` points to HOST memory holding an int64 / float64 /
//            uint8 (read them with the optiml_scalar_* helpers below). A 0-dim
//            *tensor* (e.g. BatchNorm's num_batches_tracked) is a device tensor
//            like any other: `memory == OPTIML_DEVICE`, `data` on the GPU.
// outputs  — the forward() results in order (a single tensor is one output).
//            They are preallocated on the GPU with the reference's shape and
//            dtype; every element must be written on every call.
// workspace — scratch GPU memory of `optiml_workspace_bytes(...)` bytes if the
//            candidate exports that function, else NULL / 0. Its contents are
//            undefined at each call. `optiml_workspace_bytes` is called once per
//            shape set with SHAPES ONLY: every device tensor's `data` is NULL
//            there (host scalars keep their values); size the scratch from
//            shapes, strides, dtypes and scalars, never from data.
// stream   — launch every kernel on this stream. Work on other streams, host
//            threads, or anything still running after return is rejected.
//
// Return 0 on success, or a nonzero code (e.g. a cudaError_t) on failure.
// Inputs are read-only: the harness checks they are unchanged after the call.
#ifndef OPTIML_H
#define OPTIML_H

#include <stdint.h>
#include <stddef.h>
#include <cuda_runtime.h>

#define OPTIML_MAX_DIMS 8
// 2: `memory` tells host scalars from device tensors; optiml_workspace_bytes sees shapes only.
#define OPTIML_ABI_VERSION 2

typedef enum {
  OPTIML_FLOAT32 = 0,
  OPTIML_FLOAT16 = 1,
  OPTIML_BFLOAT16 = 2,
  OPTIML_FLOAT64 = 3,
  OPTIML_INT32 = 4,
  OPTIML_INT64 = 5,
  OPTIML_INT8 = 6,
  OPTIML_UINT8 = 7,
  OPTIML_BOOL = 8,
  OPTIML_INT16 = 9
} optiml_dtype;

typedef enum {
  OPTIML_DEVICE = 0,  // `data` is GPU memory (every tensor, 0-dim ones included)
  OPTIML_HOST = 1     // `data` is host memory: a Python scalar argument
} optiml_memory;

typedef struct {
  void* data;                          // device pointer (host pointer for scalars; NULL in optiml_workspace_bytes)
  int64_t shape[OPTIML_MAX_DIMS];      // sizes, shape[0] outermost
  int64_t stride[OPTIML_MAX_DIMS];     // strides in elements, not bytes
  int32_t ndim;                        // 0 for a scalar argument or a 0-dim tensor
  int32_t dtype;                       // an optiml_dtype
  int32_t memory;                      // an optiml_memory (ABI 2)
  int32_t reserved;                    // 0
} optiml_tensor;

#ifdef __cplusplus
#define OPTIML_EXTERN_C extern "C"
#else
#define OPTIML_EXTERN_C
#endif

#if defined(_WIN32)
#define OPTIML_EXPORT OPTIML_EXTERN_C __declspec(dllexport)
#else
#define OPTIML_EXPORT OPTIML_EXTERN_C __attribute__((visibility("default")))
#endif

// Number of elements of a tensor (1 for a scalar).
static inline int64_t optiml_numel(const optiml_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

// Whether an entry is a host scalar (a Python int/float/bool), not a (possibly 0-dim) device tensor.
static inline int optiml_is_host_scalar(const optiml_tensor* t) { return t->memory == OPTIML_HOST; }

static inline int64_t optiml_scalar_i64(const optiml_tensor* t) { return *(const int64_t*)t->data; }
static inline double optiml_scalar_f64(const optiml_tensor* t) { return *(const double*)t->data; }
static inline int optiml_scalar_bool(const optiml_tensor* t) { return *(const uint8_t*)t->data != 0; }

// Ceiling division, handy for grid sizes.
static inline int64_t optiml_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Returns the last launch error as an optiml_forward status (0 when none).
static inline int optiml_check_launch(void) { return (int)cudaGetLastError(); }

// Required entry point.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs,
                                 optiml_tensor* outputs, int n_outputs,
                                 void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream);

// Optional: scratch bytes needed for inputs of these shapes (exported only if used). Called once
// per shape set, untimed, with every device `data` NULL: it must not launch work or read data.
OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs);

#endif  // OPTIML_H
