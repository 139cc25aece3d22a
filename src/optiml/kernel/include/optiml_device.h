// optiml_device.h — device helpers every generated OptiML kernel file includes (templates, no LLM).
//
// NaN-propagating min / max and Python's modulo as PyTorch computes them, an index split (divmod), a
// vector pack of N elements for 16-byte loads and stores (optiml_store_pack), and the arg-max / arg-min
// updates of row reductions (NaN wins, then the lower index), all forceinline.
#ifndef OPTIML_DEVICE_H
#define OPTIML_DEVICE_H

#include <stdint.h>

template <typename T> __device__ __forceinline__ T optiml_nanmax(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> __device__ __forceinline__ T optiml_nanmin(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> __device__ __forceinline__ T optiml_pymod(T a, T b) {
  T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float optiml_pymodf(float a, float b) {
  float r = fmodf(a, b); return (r != 0.f && ((r < 0.f) != (b < 0.f))) ? r + b : r;
}
__device__ __forceinline__ double optiml_pymodf(double a, double b) {
  double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}

// (rem, k) -> (rem / k, rem % k) for non-negative operands: the remainder is returned, the quotient left in
// rem. 32-bit division where both fit (a 64-bit one is a long emulated sequence: row kernels split every
// row index into its dims with it, which dominated short rows' instructions).
__device__ __forceinline__ int64_t optiml_divmod(int64_t& rem, int64_t k) {
  if (((((uint64_t)rem) | ((uint64_t)k)) >> 32) == 0) {
    const uint32_t q = (uint32_t)rem / (uint32_t)k;
    const int64_t r = (int64_t)((uint32_t)rem - q * (uint32_t)k);
    rem = (int64_t)q;
    return r;
  }
  const int64_t q = rem / k;
  const int64_t r = rem - q * k;
  rem = q;
  return r;
}

template <typename T, int N> struct alignas(sizeof(T) * N) OptimlPack { T v[N]; };

// Stores a pack at an address in global memory aligned to the pack, in 16-byte (or 8-byte) words. A plain
// pack assignment is compiled to one store per element wherever the address is a sum of run-time strides
// (measured on sm_90 with nvcc 13.0: four 4-byte STG for a float pack, where the load beside it is one
// LDG.128): four times the store instructions, each warp's store touching sixteen sectors in part.
template <typename T, int N> __device__ __forceinline__ void optiml_store_pack(T* dst, const OptimlPack<T, N>& pack) {
#if defined(__CUDA_ARCH__)
  constexpr int kBytes = (int)sizeof(T) * N;
  if constexpr (kBytes % 16 == 0) {
    const uint4* words = reinterpret_cast<const uint4*>(&pack);
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<uint4*>(dst) + i),
                   "r"(words[i].x), "r"(words[i].y), "r"(words[i].z), "r"(words[i].w) : "memory");
    return;
  } else if constexpr (kBytes == 8) {
    const uint2 word = *reinterpret_cast<const uint2*>(&pack);
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(dst), "r"(word.x), "r"(word.y) : "memory");
    return;
  }
#endif
  *reinterpret_cast<OptimlPack<T, N>*>(dst) = pack;  // narrower packs, and host-side emulation
}
template <typename T> __device__ __forceinline__ void optiml_argmax_upd(T& v, int64_t& i, T v2, int64_t i2) {
  const bool take = (v2 > v) || (v2 != v2 && v == v) || ((v2 == v || (v2 != v2 && v != v)) && i2 < i);
  if (take) { v = v2; i = i2; }
}
template <typename T> __device__ __forceinline__ void optiml_argmin_upd(T& v, int64_t& i, T v2, int64_t i2) {
  const bool take = (v2 < v) || (v2 != v2 && v == v) || ((v2 == v || (v2 != v2 && v != v)) && i2 < i);
  if (take) { v = v2; i = i2; }
}

// Online sum of exp(x - c) over a row, c a per-row value derived from the row's max (the max itself for
// softmax, logsumexp's guarded max): taken in the max's own pass. `s` is the sum of exp(x - m) over the elements
// seen so far, `m` the largest of them (-inf before any): an element equal to m adds 1 (also where m is infinite,
// so that the finish reproduces the reference's exp(inf - inf) = NaN for softmax and its infinite sum for
// logsumexp), a larger one rescales the sum. The finish is s * exp(m - c).
__device__ __forceinline__ float optiml_exp_of(float x) { return expf(x); }
__device__ __forceinline__ double optiml_exp_of(double x) { return exp(x); }
template <typename T> __device__ __forceinline__ void optiml_sumexp_add(double& s, T& m, T x) {
  if (x > m) { s = s * (double)optiml_exp_of(m - x) + 1.0; m = x; }
  else if (x == m) s += 1.0;
  else s += (double)optiml_exp_of(x - m);
}
template <typename T> __device__ __forceinline__ void optiml_sumexp_merge(double& s, T& m, double s2, T m2) {
  if (m2 > m) { s = s * (double)optiml_exp_of(m - m2) + s2; m = m2; }
  else if (m2 == m) s += s2;
  else s += s2 * (double)optiml_exp_of(m2 - m);
}
template <typename T> __device__ __forceinline__ double optiml_sumexp_at(double s, T m, T c) {
  return s * (double)optiml_exp_of(m - c);
}

// Host side: the chunks each of `rows` rows is cut into for a launch of rows x chunks blocks, `cap` of which run at
// once (SMs x blocks an SM). At least enough to fill the GPU, then the fewest (up to 8x that) whose last wave runs at
// least 90 % full: 128 rows on 528 slots took 5 chunks, 640 blocks, a second wave of 112 (21 % full) during which
// most SMs idle; now 8, two full waves. At most `most` (chunks no shorter than a block's pass) and `cap` (the
// workspace holds `cap` partials a row).
static inline int64_t optiml_wave_chunks(int64_t rows, int64_t cap, int64_t most) {
  if (rows < 1) rows = 1;
  int64_t limit = most < cap ? most : cap;
  if (limit < 1) limit = 1;
  const int64_t first = (cap + rows - 1) / rows;
  if (first >= limit) return limit;
  for (int64_t c = first; c <= limit && c <= 8 * first; ++c) {
    const int64_t blocks = rows * c, waves = (blocks + cap - 1) / cap;
    if (10 * blocks >= 9 * waves * cap) return c;
  }
  return first;
}

#endif  // OPTIML_DEVICE_H
