// optiml_tma.h — Tensor Memory Accelerator (TMA) descriptors for candidate kernels (sm_90 and newer).
//
// A TMA copy (`cp.async.bulk.tensor`) reads a box of a global tensor into shared memory, swizzled as
// wgmma expects and zero-filled outside the tensor, described by a 128-byte tensor map that the
// driver's `cuTensorMapEncodeTiled` writes on the host. Candidates may not look up driver symbols
// themselves (screening rejects `cudaGetDriverEntryPoint*`: a looked-up symbol could be anything),
// so this header does it for that one function, whose only effect is writing the map.
//
//   optiml_tensor_map map;
//   int err = optiml_tensor_map_encode(&map, OPTIML_TMA_BFLOAT16, 2, ptr, dims, strides, box,
//                                      OPTIML_TMA_SWIZZLE_128B);
//   kernel<<<...>>>(..., map);   // a `const __grid_constant__ optiml_tensor_map` parameter
//
// dims[0] is the contiguous dimension; strides[i] is the byte stride of dimension i + 1 (rank - 1
// entries, multiples of 16); box[i] the box extent along dimension i (box[0] * element size at most
// 128 bytes with the 128-byte swizzle). Returns 0, or the driver's nonzero CUresult / a
// cudaError_t when the function cannot be found.
#ifndef OPTIML_TMA_H
#define OPTIML_TMA_H

#include <stdint.h>
#include <cuda_runtime.h>

// CUtensorMap's size and alignment (cuda.h is not included: it would add a megabyte to every build).
typedef struct __attribute__((aligned(128))) {
  unsigned long long opaque[16];
} optiml_tensor_map;

// CUtensorMapDataType and CUtensorMapSwizzle values (cuda.h).
enum {
  OPTIML_TMA_FLOAT16 = 6,
  OPTIML_TMA_FLOAT32 = 7,
  OPTIML_TMA_BFLOAT16 = 9,
};
enum {
  OPTIML_TMA_SWIZZLE_NONE = 0,
  OPTIML_TMA_SWIZZLE_64B = 2,
  OPTIML_TMA_SWIZZLE_128B = 3,
};

typedef int (*optiml_encode_tiled_fn)(optiml_tensor_map*, int, unsigned, void*, const uint64_t*, const uint64_t*,
                                      const unsigned*, const unsigned*, int, int, int, int);

static inline int optiml_tensor_map_encode(optiml_tensor_map* map, int dtype, unsigned rank, const void* base,
                                           const uint64_t* dims, const uint64_t* strides, const unsigned* box,
                                           int swizzle) {
  static optiml_encode_tiled_fn encode = 0;
  if (encode == 0) {
    void* fn = 0;
    cudaDriverEntryPointQueryResult found;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // the caller may fall back to another kernel: leave no error behind
      return (int)e;
    }
    if (found != cudaDriverEntryPointSuccess || fn == 0) return (int)cudaErrorSymbolNotFound;
    encode = (optiml_encode_tiled_fn)fn;
  }
  const unsigned ones[5] = {1, 1, 1, 1, 1};
  // interleave none, 256-byte L2 promotion, zeros outside the tensor
  return encode(map, dtype, rank, (void*)base, dims, strides, box, ones, 0, swizzle, 3, 0);
}

#endif  // OPTIML_TMA_H
