"""Which CUDA kernel structure reaches the DRAM floor for RMSNorm over the channels of an NCHW float32 tensor:
KernelBench's level1/36_RMSNorm_, ``x / sqrt(mean(x**2, dim=1, keepdim=True) + 1e-5)`` on a (112, 64, 512, 512)
tensor (7.5 GB in, 7.5 GB out).

Our generated kernel gives each thread one spatial position, loops over the 64 channels with 4-byte loads
(64-thread blocks), keeps the 64 values in registers between the sum of squares and the normalisation and
accumulates in fp64: 10.9 ms on an H100, where reading and writing 15 GB at ~3.35 TB/s takes ~4.5 ms and
``torch.compile`` comes close to that. This script builds one ``load_inline`` extension holding these
structures, each parameterised, and times every configuration the way KernelBench does (CUDA events, L2
flushed by a 256 MB write before each call, median):

* ``a_scalar_reg``: one position per thread, 4-byte loads, all C channels in registers: as today (fp64 sum,
  x / rms), with an fp32 sum, and with an fp32 sum multiplying by 1 / rms (as every other structure does; within
  an ulp of dividing);
* ``b_vec_reg``: VEC (2 or 4) neighbouring positions per thread with 8/16-byte loads along H*W, all C*VEC
  values in registers (C*VEC <= 256; at 256 ptxas spills some);
* ``b_vec_twopass``: the same loads with no caching: one pass sums squares, a second reads x again (L2 or
  DRAM) to normalise;
* ``c_smem_tile``: a block stages a [C x P] tile in shared memory with 16-byte loads (a warp reads 512 B of
  a channel's row when P >= 128), sums each position's column, then writes with 16-byte stores;
* (d): the fastest correct configurations of the two fastest structures again (rows keep the structure's
  name, ``hint=`` in the config) with cache hints: ``ldg`` (``ld.global.nc``), ``ldg_stcs`` (plus
  ``st.global.cs`` stores), ``ldcs_stcs`` (``ld.global.cs`` too), ``nc256_stcs``
  (``ld.global.nc.L1::no_allocate.L2::256B`` with ``st.global.cs``). ``plain`` loads already compile to
  ``ld.global.nc`` (x is ``const __restrict__``); ``plain`` stores are ``st.global.wb`` through ``__stwb``
  (NVVM splits a plain float4 store into four 4-byte ones).

Block sizes 64, 128 and 256; one position group (or tile) per thread (block), no grid-stride loop: each row
records its grid. Where H*W is not a multiple of the vector width, or a pointer is not aligned to it, the
vector structures fall back to scalar loads in the same kernel family, without hints (``path`` = ``scalar``);
a partial last group or tile of each image is handled element by element. Every output is checked against an
exact reference (computed in float64 over a few images at a time, rounded to fp32): its largest difference and
``torch.allclose`` at KernelBench's 1e-4. Rows give ms, GB/s (bytes read + written / time) and the
fraction of a measured copy floor (``out.copy_(x)`` on the same tensors: copy ms / row ms), next to eager
PyTorch and ``torch.compile`` (default mode) of the reference in the same process.

    PYTHONPATH=src python benchmarks/rmsnorm_nchw_probe.py --out benchmarks/results/rmsnorm_nchw_probe_h100.json

About two minutes on an H100, most of it building the extension (once per machine: torch caches it) and
``torch.compile``'s first call; the 38 timed configurations take ~15 s (``--skip-compile`` leaves that out).

``--quick`` runs (16, 64, 256, 256), then C=32, C=128 and an odd H*W (255 x 255) at that size;
``--shape B C H W`` one shape of your own; ``--dump-source PATH`` writes the extension's CUDA source (the
kernels and a C launcher, no torch headers: ``nvcc -arch=sm_90 -c PATH`` builds it without a GPU) and its C++
side (torch tensors to raw pointers) beside it, PATH with the suffix ``.cpp``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from probe_timing import FLUSH_BYTES, KERNELBENCH_TOLERANCE, build_extension, time_ms

sys.path.insert(0, str(Path(__file__).resolve().parent))

EPS = 1e-5
KERNELBENCH_SHAPE = (112, 64, 512, 512)
QUICK_SHAPE = (16, 64, 256, 256)
#: --quick's further cases: other channel counts, and an H*W that no vector width divides (the scalar path).
QUICK_EXTRA_SHAPES = ((16, 32, 256, 256), (16, 128, 256, 256), (16, 64, 255, 255))
DEFAULT_CHANNELS = (32, 64, 128)  # what --dump-source instantiates the register-caching kernels for
H100_DRAM_BYTES_PER_S = 3.35e12  # H100 SXM's nominal HBM3 bandwidth
CHECK_CHUNK_BYTES = 512 * 1024 * 1024  # fp32 bytes of input per reference / comparison chunk
BLOCKS = (64, 128, 256)
MAX_CACHED_FLOATS = 256  # C * VEC values a register-caching thread may hold (the kernel's kMaxCachedFloats)

#: variant name -> the launcher's kind.
KINDS = {"a_scalar_reg": 0, "b_vec_reg": 0, "b_vec_twopass": 1, "c_smem_tile": 2}
#: hint name -> the kernels' HINT template argument (loads; stores).
HINTS = {
    "plain": 0,  # ld.global / st.global
    "ldg": 1,  # ld.global.nc / st.global
    "ldg_stcs": 2,  # ld.global.nc / st.global.cs
    "ldcs_stcs": 3,  # ld.global.cs / st.global.cs
    "nc256_stcs": 4,  # ld.global.nc.L1::no_allocate.L2::256B / st.global.cs
}

CUDA_KERNELS = r"""
// RMSNorm over dim 1 of a contiguous float32 (B, C, HW) tensor: out = x / sqrt(mean_c(x^2) + eps).
// The kernels of benchmarks/rmsnorm_nchw_probe.py; no torch headers (rmsprobe_launch takes raw pointers).
#include <cuda_runtime.h>
#include <climits>
#include <cstdint>

#ifndef RMSPROBE_CHANNELS  // the channel counts the register-caching kernels are instantiated for
#define RMSPROBE_CHANNELS(X) X(32) X(64) X(128)
#endif

namespace rmsprobe {

constexpr int kMaxBlock = 256;
constexpr int kMaxCachedFloats = 256;  // C * VEC values a register-caching thread may hold
constexpr int kUnroll = 8;             // independent 16-byte loads a tile thread issues before storing to smem

// HINT: 0 ld.global/st.global, 1 ld.global.nc, 2 ld.global.nc + st.global.cs, 3 ld.global.cs + st.global.cs,
// 4 ld.global.nc.L1::no_allocate.L2::256B + st.global.cs.
template <int HINT>
__device__ __forceinline__ float ld1(const float* p) {
  if constexpr (HINT == 1 || HINT == 2) {
    return __ldg(p);
  } else if constexpr (HINT == 3) {
    return __ldcs(p);
  } else if constexpr (HINT == 4) {
    float v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
  } else {
    return *p;
  }
}

template <int HINT>
__device__ __forceinline__ float2 ld2(const float* p) {
  const float2* q = reinterpret_cast<const float2*>(p);
  if constexpr (HINT == 1 || HINT == 2) {
    return __ldg(q);
  } else if constexpr (HINT == 3) {
    return __ldcs(q);
  } else if constexpr (HINT == 4) {
    float2 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(q));
    return v;
  } else {
    return *q;
  }
}

template <int HINT>
__device__ __forceinline__ float4 ld4(const float* p) {
  const float4* q = reinterpret_cast<const float4*>(p);
  if constexpr (HINT == 1 || HINT == 2) {
    return __ldg(q);
  } else if constexpr (HINT == 3) {
    return __ldcs(q);
  } else if constexpr (HINT == 4) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(q));
    return v;
  } else {
    return *q;
  }
}

template <int HINT>
__device__ __forceinline__ void st1(float* p, float v) {
  if constexpr (HINT >= 2) {
    __stcs(p, v);
  } else {
    __stwb(p, v);  // st.global.wb, the default store (a plain float4 store gets split into four)
  }
}

template <int HINT>
__device__ __forceinline__ void st2(float* p, float2 v) {
  if constexpr (HINT >= 2) {
    __stcs(reinterpret_cast<float2*>(p), v);
  } else {
    __stwb(reinterpret_cast<float2*>(p), v);
  }
}

template <int HINT>
__device__ __forceinline__ void st4(float* p, float4 v) {
  if constexpr (HINT >= 2) {
    __stcs(reinterpret_cast<float4*>(p), v);
  } else {
    __stwb(reinterpret_cast<float4*>(p), v);
  }
}

// g / groups, in 32 bits where both fit (a 64-bit division is a subroutine call).
__device__ __forceinline__ long long image_of(long long g, long long groups) {
  if (g <= 0xffffffffLL && groups <= 0xffffffffLL)
    return static_cast<unsigned>(g) / static_cast<unsigned>(groups);
  return g / groups;
}

// VEC consecutive floats at p (aligned to 4*VEC bytes) into v[0..VEC).
template <int VEC, int HINT>
__device__ __forceinline__ void load_vec(const float* p, float* v) {
  if constexpr (VEC == 4) {
    const float4 t = ld4<HINT>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if constexpr (VEC == 2) {
    const float2 t = ld2<HINT>(p);
    v[0] = t.x; v[1] = t.y;
  } else {
    static_assert(VEC == 1, "VEC is 1, 2 or 4");
    v[0] = ld1<HINT>(p);
  }
}

template <int VEC, int HINT>
__device__ __forceinline__ void store_vec(float* p, const float* v) {
  if constexpr (VEC == 4) {
    st4<HINT>(p, make_float4(v[0], v[1], v[2], v[3]));
  } else if constexpr (VEC == 2) {
    st2<HINT>(p, make_float2(v[0], v[1]));
  } else {
    st1<HINT>(p, v[0]);
  }
}

// (a), (b): VEC neighbouring positions per thread, all C channels' values kept in registers between the sum of
// squares and the normalisation; ACC is the sum's type. ALIGNED: HW % VEC == 0 and both pointers aligned to
// 4*VEC bytes (vector loads); otherwise element by element, the last group of each image partial. DIV: every
// element divided by the rms (x / rms, as the reference); otherwise multiplied by 1/rms (within an ulp), as
// every other kernel here does.
template <int C, int VEC, typename ACC, bool ALIGNED, int HINT, bool DIV>
__global__ void __launch_bounds__(kMaxBlock)
reg_kernel(const float* __restrict__ x, float* __restrict__ out, long long B, long long HW, float eps) {
  const long long groups = (HW + VEC - 1) / VEC;
  const long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= B * groups) return;
  const long long b = image_of(g, groups);
  const long long p0 = (g - b * groups) * VEC;
  const long long base = b * C * HW + p0;
  const float* xp = x + base;
  float* op = out + base;
  const int valid = ALIGNED ? VEC : static_cast<int>(HW - p0 < VEC ? HW - p0 : VEC);
  float v[C][VEC];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if constexpr (ALIGNED) {
      load_vec<VEC, HINT>(xp + c * HW, v[c]);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[c][k] = k < valid ? ld1<HINT>(xp + c * HW + k) : 0.0f;
    }
  }
  float d[VEC];  // the rms (DIV), else 1 / rms
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    ACC s = ACC(0);
#pragma unroll
    for (int c = 0; c < C; ++c) s += static_cast<ACC>(v[c][k]) * static_cast<ACC>(v[c][k]);
    const float rms = sqrtf(static_cast<float>(s / static_cast<ACC>(C)) + eps);
    d[k] = DIV ? rms : 1.0f / rms;
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float o[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) o[k] = DIV ? v[c][k] / d[k] : v[c][k] * d[k];
    if constexpr (ALIGNED) {
      store_vec<VEC, HINT>(op + c * HW, o);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        if (k < valid) st1<HINT>(op + c * HW + k, o[k]);
    }
  }
}

// (b) two-pass: the same loads, nothing cached: sum squares over the C channels, then read x again to normalise.
template <int VEC, bool ALIGNED, int HINT>
__global__ void __launch_bounds__(kMaxBlock)
twopass_kernel(const float* __restrict__ x, float* __restrict__ out, long long B, int C, long long HW, float eps) {
  const long long groups = (HW + VEC - 1) / VEC;
  const long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= B * groups) return;
  const long long b = image_of(g, groups);
  const long long p0 = (g - b * groups) * VEC;
  const long long base = b * static_cast<long long>(C) * HW + p0;
  const float* xp = x + base;
  float* op = out + base;
  const int valid = ALIGNED ? VEC : static_cast<int>(HW - p0 < VEC ? HW - p0 : VEC);
  float s[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) s[k] = 0.0f;
#pragma unroll 8
  for (int c = 0; c < C; ++c) {
    float v[VEC];
    if constexpr (ALIGNED) {
      load_vec<VEC, HINT>(xp + c * HW, v);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = k < valid ? ld1<HINT>(xp + c * HW + k) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) s[k] += v[k] * v[k];
  }
  float d[VEC];  // 1 / rms
#pragma unroll
  for (int k = 0; k < VEC; ++k) d[k] = 1.0f / sqrtf(s[k] / static_cast<float>(C) + eps);
#pragma unroll 8
  for (int c = 0; c < C; ++c) {
    float v[VEC];
    if constexpr (ALIGNED) {
      load_vec<VEC, HINT>(xp + c * HW, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] *= d[k];
      store_vec<VEC, HINT>(op + c * HW, v);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        if (k < valid) st1<HINT>(op + c * HW + k, ld1<HINT>(xp + c * HW + k) * d[k]);
    }
  }
}

// (c) one [C x P] tile per block, staged in shared memory: tile[C][P], then per-position partial sums over G
// channel groups (G = blockDim / P when blockDim >= P), then 1 / rms per position, then the normalised tile.
// ALIGNED (HW % 4 == 0, pointers 16-byte aligned): 16-byte loads and stores, a warp covering
// 32 * 16 = 512 B of one channel's row when P >= 128; the last tile of an image may be partial
// (a multiple of 4 positions then). Otherwise element by element.
template <int P, bool ALIGNED, int HINT>
__global__ void __launch_bounds__(kMaxBlock)
tile_kernel(const float* __restrict__ x, float* __restrict__ out, long long B, int C, long long HW, float eps) {
  static_assert(P % 4 == 0, "P is a multiple of 4");
  extern __shared__ float4 smem4[];
  float* tile = reinterpret_cast<float*>(smem4);  // C * P
  const int T = blockDim.x;
  const int G = T >= P ? T / P : 1;
  float* part = tile + C * P;  // G * P
  float* inv = part + G * P;   // P: 1 / rms, 16-byte aligned (C * P and G * P are multiples of 4)
  const int tid = threadIdx.x;
  const unsigned tiles = static_cast<unsigned>((HW + P - 1) / P);  // B * tiles blocks: fits in 32 bits
  const unsigned b = blockIdx.x / tiles;
  const long long p0 = static_cast<long long>(blockIdx.x - b * tiles) * P;
  const int valid = static_cast<int>(HW - p0 < P ? HW - p0 : P);
  const float* xp = x + b * static_cast<long long>(C) * HW + p0;
  float* op = out + b * static_cast<long long>(C) * HW + p0;
  constexpr int P4 = P / 4;
  if constexpr (ALIGNED) {
    const int n = C * P4;
    for (int i0 = tid; i0 < n; i0 += T * kUnroll) {
      float4 r[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * T;
        const int c = i / P4;
        const int q = i - c * P4;
        r[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < n && q * 4 < valid) r[u] = ld4<HINT>(xp + c * HW + q * 4);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * T;
        if (i < n) smem4[i] = r[u];
      }
    }
  } else {
    const int n = C * P;
    for (int i0 = tid; i0 < n; i0 += T * kUnroll) {
      float r[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * T;
        const int c = i / P;
        const int q = i - c * P;
        r[u] = (i < n && q < valid) ? ld1<HINT>(xp + c * HW + q) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * T;
        if (i < n) tile[i] = r[u];
      }
    }
  }
  __syncthreads();
  for (int i = tid; i < G * P; i += T) {
    const int g = i / P;
    const int pos = i - g * P;
    float s = 0.0f;
    for (int c = g; c < C; c += G) {
      const float v = tile[c * P + pos];
      s += v * v;
    }
    part[i] = s;
  }
  __syncthreads();
  for (int pos = tid; pos < P; pos += T) {
    float s = 0.0f;
    for (int g = 0; g < G; ++g) s += part[g * P + pos];
    inv[pos] = 1.0f / sqrtf(s / static_cast<float>(C) + eps);
  }
  __syncthreads();
  if constexpr (ALIGNED) {
    const float4* inv4 = reinterpret_cast<const float4*>(inv);
    for (int i = tid; i < C * P4; i += T) {
      const int c = i / P4;
      const int q = i - c * P4;
      if (q * 4 >= valid) continue;
      const float4 v = smem4[i];
      const float4 d = inv4[q];
      st4<HINT>(op + c * HW + q * 4, make_float4(v.x * d.x, v.y * d.y, v.z * d.z, v.w * d.w));
    }
  } else {
    for (int i = tid; i < C * P; i += T) {
      const int c = i / P;
      const int q = i - c * P;
      if (q < valid) st1<HINT>(op + c * HW + q, tile[i] * inv[q]);
    }
  }
}

struct Launch {
  const float* x;
  float* out;
  long long B, C, HW;
  float eps;
  int block;
  cudaStream_t stream;
  long long* info;  // out: grid, block, dynamic smem bytes, 1 if the vector path ran (0: scalar)
};

inline bool aligned_for(const Launch& L, int vec) {
  const uintptr_t mask = static_cast<uintptr_t>(4 * vec - 1);
  return L.HW % vec == 0 && (reinterpret_cast<uintptr_t>(L.x) & mask) == 0 &&
         (reinterpret_cast<uintptr_t>(L.out) & mask) == 0;
}

inline int finish(const Launch& L, long long grid, long long smem, bool vector_path) {
  L.info[0] = grid;
  L.info[1] = L.block;
  L.info[2] = smem;
  L.info[3] = vector_path ? 1 : 0;
  return static_cast<int>(cudaGetLastError());
}

template <int C, int VEC, typename ACC, int HINT, bool DIV>
int launch_reg_c(const Launch& L) {
  if constexpr (C * VEC > kMaxCachedFloats) {
    return -1;
  } else {
    const long long groups = (L.HW + VEC - 1) / VEC;
    const long long grid = (L.B * groups + L.block - 1) / L.block;
    if (grid > INT_MAX) return -1;
    const bool aligned = aligned_for(L, VEC);
    if (aligned) {
      reg_kernel<C, VEC, ACC, true, HINT, DIV><<<static_cast<unsigned>(grid), L.block, 0, L.stream>>>(
          L.x, L.out, L.B, L.HW, L.eps);
    } else if constexpr (VEC > 1) {  // the scalar fallback runs without hints
      reg_kernel<C, VEC, ACC, false, 0, DIV><<<static_cast<unsigned>(grid), L.block, 0, L.stream>>>(
          L.x, L.out, L.B, L.HW, L.eps);
    } else {
      return -1;  // unreachable: VEC == 1 is always aligned
    }
    return finish(L, grid, 0, aligned);
  }
}

template <int VEC, typename ACC, int HINT, bool DIV = false>
int launch_reg(const Launch& L) {
  switch (L.C) {
#define RMSPROBE_CASE(c) \
  case c:                \
    return launch_reg_c<c, VEC, ACC, HINT, DIV>(L);
    RMSPROBE_CHANNELS(RMSPROBE_CASE)
#undef RMSPROBE_CASE
    default:
      return -1;  // no register-caching kernel for this channel count
  }
}

template <int VEC, int HINT>
int launch_twopass(const Launch& L) {
  const long long groups = (L.HW + VEC - 1) / VEC;
  const long long grid = (L.B * groups + L.block - 1) / L.block;
  if (grid > INT_MAX || L.C > INT_MAX) return -1;
  const bool aligned = aligned_for(L, VEC);
  const int C = static_cast<int>(L.C);
  if (aligned) {
    twopass_kernel<VEC, true, HINT><<<static_cast<unsigned>(grid), L.block, 0, L.stream>>>(
        L.x, L.out, L.B, C, L.HW, L.eps);
  } else {
    twopass_kernel<VEC, false, 0><<<static_cast<unsigned>(grid), L.block, 0, L.stream>>>(
        L.x, L.out, L.B, C, L.HW, L.eps);
  }
  return finish(L, grid, 0, aligned);
}

template <int P, int HINT>
int launch_tile(const Launch& L) {
  const long long tiles = (L.HW + P - 1) / P;
  const long long grid = L.B * tiles;
  const long long groups = L.block >= P ? L.block / P : 1;
  const long long smem = static_cast<long long>(sizeof(float)) * (L.C * P + groups * P + P);
  if (grid > INT_MAX || smem > 227 * 1024) return -1;
  const bool aligned = aligned_for(L, 4);
  void (*kernel)(const float*, float*, long long, int, long long, float) =
      aligned ? tile_kernel<P, true, HINT> : tile_kernel<P, false, 0>;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  kernel<<<static_cast<unsigned>(grid), L.block, static_cast<size_t>(smem), L.stream>>>(
      L.x, L.out, L.B, static_cast<int>(L.C), L.HW, L.eps);
  return finish(L, grid, smem, aligned);
}

// flags: 1 = fp64 sum, 2 = divide by the rms; both only for one position per thread (VEC 1) without hints.
template <int HINT>
int launch_kind(const Launch& L, int kind, int param, int flags) {
  if (kind == 0) {  // register-caching: param = VEC
    if (flags != 0) {
      if constexpr (HINT == 0) {
        if (param != 1) return -1;
        switch (flags) {
          case 1: return launch_reg<1, double, 0, false>(L);
          case 2: return launch_reg<1, float, 0, true>(L);
          case 3: return launch_reg<1, double, 0, true>(L);
          default: return -1;
        }
      } else {
        return -1;
      }
    }
    switch (param) {
      case 1: return launch_reg<1, float, HINT>(L);
      case 2: return launch_reg<2, float, HINT>(L);
      case 4: return launch_reg<4, float, HINT>(L);
      default: return -1;
    }
  }
  if (flags != 0) return -1;
  if (kind == 1) {  // two-pass: param = VEC
    switch (param) {
      case 2: return launch_twopass<2, HINT>(L);
      case 4: return launch_twopass<4, HINT>(L);
      default: return -1;
    }
  }
  if (kind == 2) {  // shared-memory tile: param = P positions
    switch (param) {
      case 32: return launch_tile<32, HINT>(L);
      case 64: return launch_tile<64, HINT>(L);
      case 128: return launch_tile<128, HINT>(L);
      default: return -1;
    }
  }
  return -1;
}

}  // namespace rmsprobe

// The C interface the extension's C++ side (TORCH_WRAPPER, built by the host compiler) calls.
// Returns 0 on success, -1 for a configuration this source has no kernel for, else the launch's cudaError_t.
// info (4 slots): grid, block, dynamic shared memory bytes, vector path (1) or scalar fallback (0).
extern "C" int rmsprobe_launch(const float* x, float* out, long long B, long long C, long long HW, float eps,
                               int kind, int block, int param, int flags, int hint, void* stream, long long* info) {
  using namespace rmsprobe;
  if (block < 32 || block > kMaxBlock || block % 32 != 0) return -1;
  if (B <= 0 || C <= 0 || HW <= 0) return -1;
  const Launch L{x, out, B, C, HW, eps, block, static_cast<cudaStream_t>(stream), info};
  switch (hint) {
    case 0: return launch_kind<0>(L, kind, param, flags);
    case 1: return launch_kind<1>(L, kind, param, flags);
    case 2: return launch_kind<2>(L, kind, param, flags);
    case 3: return launch_kind<3>(L, kind, param, flags);
    case 4: return launch_kind<4>(L, kind, param, flags);
    default: return -1;
  }
}

extern "C" const char* rmsprobe_error(int status) { return cudaGetErrorString(static_cast<cudaError_t>(status)); }
"""

TORCH_WRAPPER = r"""
// The extension's C++ side: tensors in, raw pointers to the kernels' C interface (the CUDA source has no torch
// headers, so nvcc builds it in seconds while the host compiler builds this file and its bindings).
#include <torch/extension.h>
#include <vector>

extern "C" int rmsprobe_launch(const float* x, float* out, long long B, long long C, long long HW, float eps,
                               int kind, int block, int param, int flags, int hint, void* stream, long long* info);
extern "C" const char* rmsprobe_error(int status);

// [status, grid, block, smem bytes, vector path]; status -1: no kernel for this configuration (nothing ran).
// stream: torch.cuda.current_stream().cuda_stream.
std::vector<int64_t> launch(torch::Tensor x, torch::Tensor out, double eps, int64_t kind, int64_t block,
                            int64_t param, int64_t flags, int64_t hint, int64_t stream) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "x and out must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && out.scalar_type() == torch::kFloat, "float32 only");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors only");
  TORCH_CHECK(x.dim() >= 2 && x.sizes() == out.sizes(), "x: (B, C, ...), out: the same shape");
  const int64_t B = x.size(0), C = x.size(1);
  const int64_t HW = B * C == 0 ? 0 : x.numel() / (B * C);
  long long info[4] = {0, 0, 0, 0};
  const int status = rmsprobe_launch(x.data_ptr<float>(), out.data_ptr<float>(), B, C, HW, static_cast<float>(eps),
                                     static_cast<int>(kind), static_cast<int>(block), static_cast<int>(param),
                                     static_cast<int>(flags), static_cast<int>(hint),
                                     reinterpret_cast<void*>(stream), info);
  TORCH_CHECK(status <= 0, "launch failed: ", rmsprobe_error(status));
  return {status, info[0], info[1], info[2], info[3]};
}
"""

Shape = tuple[int, int, int, int]


@dataclass(frozen=True)
class Config:
    """One kernel configuration: ``param`` is VEC (positions per thread) or P (the tile's positions); ``acc64``
    (an fp64 sum) and ``divide`` (x / rms rather than x * (1 / rms)) exist for the baseline only."""

    variant: str
    block: int
    param: int = 1
    acc64: bool = False
    divide: bool = False
    hint: str = "plain"

    @property
    def kind(self) -> int:
        return KINDS[self.variant]

    @property
    def flags(self) -> int:
        """The launcher's ``flags``: 1 fp64 sum, 2 divide."""
        return int(self.acc64) | 2 * int(self.divide)

    def label(self) -> str:
        size = f"P={self.param}" if self.variant == "c_smem_tile" else f"VEC={self.param}"
        acc = "fp64" if self.acc64 else "fp32"
        norm = "div" if self.divide else "mul"
        return f"{size} block={self.block} acc={acc} {norm} hint={self.hint}"

    def supports(self, channels: int) -> bool:
        """Whether the source has a kernel for ``channels`` (register caching holds C*VEC <= 256 floats)."""
        return self.kind != 0 or channels * self.param <= MAX_CACHED_FLOATS


def variant_configs() -> list[Config]:
    """Structures (a)-(c), every block size, no cache hints; (d) comes from :func:`hint_configs`. The baseline
    runs as today's kernel (fp64 sum, x / rms), then with an fp32 sum, then multiplying by 1 / rms as the rest do."""
    baseline = ((True, True), (False, True), (False, False))  # (acc64, divide)
    configs = [Config("a_scalar_reg", block, 1, acc64, divide) for acc64, divide in baseline for block in BLOCKS]
    configs += [Config("b_vec_reg", block, vec) for vec in (2, 4) for block in BLOCKS]
    configs += [Config("b_vec_twopass", block, vec) for vec in (2, 4) for block in BLOCKS]
    configs += [Config("c_smem_tile", block, tile) for tile in (32, 64, 128) for block in BLOCKS]
    return configs


def hint_targets(measured: Sequence[tuple[Config, dict[str, Any]]], count: int = 2) -> list[Config]:
    """The fastest correct configuration of each of the ``count`` fastest structures (vector register caching
    and two-pass count as one: ``b``) among those with hinted kernels (not the baseline's fp64 sum or divide)."""
    usable = [(row["ms"], config) for config, row in measured if row.get("ms") is not None and row.get("allclose")]
    chosen: list[Config] = []
    families: set[str] = set()
    for _, config in sorted(usable, key=lambda pair: pair[0]):
        family = config.variant.split("_")[0]
        if family not in families and config.hint == "plain" and not config.flags:
            families.add(family)
            chosen.append(config)
        if len(chosen) == count:
            break
    return chosen


def hint_configs(targets: Iterable[Config]) -> list[Config]:
    """(d): each target again under every cache hint."""
    return [Config(t.variant, t.block, t.param, hint=hint) for t in targets for hint in HINTS if hint != "plain"]


def case_shapes(shape: Sequence[int] | None, quick: bool) -> list[Shape]:
    """The shapes a run measures: ``--shape``, else ``--quick``'s four, else KernelBench's."""
    if shape is not None:
        b, c, h, w = (int(v) for v in shape)
        return [(b, c, h, w)]
    if quick:
        return [QUICK_SHAPE, *QUICK_EXTRA_SHAPES]
    return [KERNELBENCH_SHAPE]


def traffic_bytes(shape: Sequence[int]) -> int:
    """Bytes a kernel must move: the fp32 input read once and the output written once."""
    numel = 1
    for size in shape:
        numel *= size
    return 2 * 4 * numel


def nominal_floor_ms(shape: Sequence[int], bytes_per_s: float = H100_DRAM_BYTES_PER_S) -> float:
    """The DRAM floor at a nominal bandwidth, in ms."""
    return traffic_bytes(shape) / bytes_per_s * 1e3


def kernel_source(channels: Iterable[int] = DEFAULT_CHANNELS) -> str:
    """The kernels alone (no torch headers), with register-caching kernels for ``channels``."""
    cases = " ".join(f"X({int(c)})" for c in sorted(set(channels)))
    return f"#define RMSPROBE_CHANNELS(X) {cases}\n" + CUDA_KERNELS


def reference(x: torch.Tensor) -> torch.Tensor:
    """KernelBench's forward (fp32 throughout)."""
    rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + EPS)
    return x / rms


def chunk_images(shape: Sequence[int], chunk_bytes: int | None = None) -> int:
    """Images per reference / comparison chunk (at least one), ``CHECK_CHUNK_BYTES`` of input unless told."""
    per_image = traffic_bytes(shape) // 2 // max(1, shape[0])
    return max(1, (CHECK_CHUNK_BYTES if chunk_bytes is None else chunk_bytes) // max(1, per_image))


def exact_reference(x: torch.Tensor, out: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """``out`` := the reference computed in float64 a few images at a time, rounded to fp32."""
    step = chunk_images(x.shape)
    for start in range(0, x.shape[0], step):
        xd = x[start : start + step].double()
        rms = torch.sqrt(torch.mean(xd * xd, dim=1, keepdim=True) + eps)
        out[start : start + step].copy_(xd / rms)
        del xd, rms
    return out


def compare(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """The largest difference from ``ref`` and KernelBench's verdict at 1e-4, a few images at a time."""
    step = chunk_images(out.shape)
    worst, close = 0.0, True
    for start in range(0, out.shape[0], step):
        got, want = out[start : start + step], ref[start : start + step]
        diff = float((got - want).abs().max())
        worst = math.nan if math.isnan(diff) or math.isnan(worst) else max(worst, diff)  # a NaN stays
        close = close and bool(torch.allclose(got, want, atol=KERNELBENCH_TOLERANCE, rtol=KERNELBENCH_TOLERANCE))
    return {"max_abs_diff": worst, "allclose": close}


def build(channels: Iterable[int]) -> tuple[Any, float]:
    """The extension and the seconds its build took (:func:`probe_timing.build_extension`)."""
    return build_extension("rmsnorm_nchw_probe_", kernel_source(channels), TORCH_WRAPPER, ["launch"])


class Case:
    """One shape's tensors on the GPU: KernelBench's input, an output, the exact reference, an L2 flush buffer."""

    def __init__(self, shape: Shape, warmup: int, iters: int) -> None:
        torch.manual_seed(42)
        self.shape = shape
        self.nbytes = traffic_bytes(shape)
        self.warmup, self.iters = warmup, iters
        self.x = torch.rand(shape, device="cuda")  # KernelBench's input
        self.out = torch.empty_like(self.x)
        self.exact = exact_reference(self.x, torch.empty_like(self.x))
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.copy_ms = self.time(lambda: self.out.copy_(self.x))

    def time(self, fn: Callable[[], object]) -> float:
        return time_ms(fn, self.flush, self.warmup, self.iters)

    def row(self, variant: str, config: str, ms: float | None, **extra: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"variant": variant, "config": config, "ms": ms}
        row["gbps"] = self.nbytes / (ms * 1e-3) / 1e9 if ms else None
        row["fraction_of_copy"] = self.copy_ms / ms if ms else None
        row.update(extra)
        return row

    def torch_rows(self, compile_too: bool) -> list[dict[str, Any]]:
        """Eager PyTorch, then ``torch.compile`` (default mode, compiled afresh for this shape)."""
        with torch.no_grad():
            rows = [self.row("torch_eager", "fp32", self.time(lambda: reference(self.x)))]
            rows[-1].update(compare(reference(self.x), self.exact))
            if compile_too:
                try:
                    torch._dynamo.reset()  # KernelBench compiles per problem
                    compiled = torch.compile(reference)
                    rows.append(self.row("torch_compile", "default", self.time(lambda: compiled(self.x))))
                    rows[-1].update(compare(compiled(self.x), self.exact))
                except Exception as error:  # record why, and go on with the kernels
                    rows.append(self.row("torch_compile", "default", None, note=f"error: {error}"[:200]))
        torch.cuda.empty_cache()
        return rows

    def kernel_row(self, module: Any, config: Config) -> dict[str, Any]:
        """``config`` checked once (on an output poisoned with NaN), then timed."""
        if not config.supports(self.shape[1]):
            return self.row(config.variant, config.label(), None, note="no kernel (C*VEC > 256)")
        self.out.fill_(float("nan"))  # a kernel that skips an element fails the check
        stream = torch.cuda.current_stream().cuda_stream
        kernel_args = (self.x, self.out, EPS, config.kind, config.block, config.param, config.flags)
        launch_args = (*kernel_args, HINTS[config.hint], stream)
        status, grid, block, smem, vector = module.launch(*launch_args)
        if status != 0:
            return self.row(config.variant, config.label(), None, note="no kernel for this config")
        torch.cuda.synchronize()
        check = compare(self.out, self.exact)
        ms = self.time(lambda: module.launch(*launch_args))
        path = "vector" if vector and (config.kind == 2 or config.param > 1) else "scalar"
        return self.row(config.variant, config.label(), ms, **check, grid=grid, block=block, smem_bytes=smem, path=path)


def _print_row(row: dict[str, Any]) -> None:
    def cell(key: str, spec: str, width: int) -> str:
        return format(row[key], spec) if row.get(key) is not None else "-".rjust(width)

    ok = {True: "ok", False: "FAIL", None: "-"}[row.get("allclose")]
    where = f"grid={row['grid']} {row['path']}" if row.get("grid") else row.get("note", "")
    print(
        f"{row['variant']:14s} {row['config']:44s} {cell('ms', '8.3f', 8)} {cell('gbps', '7.0f', 7)} "
        f"{cell('fraction_of_copy', '5.2f', 5)} {cell('max_abs_diff', '8.1e', 8)} {ok:4s} {where}",
        flush=True,
    )


def run_case(module: Any, shape: Shape, args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration on one shape, with the copy floor, eager and compiled references."""
    case = Case(shape, args.warmup, args.iters)
    record: dict[str, Any] = {
        "shape": list(shape),
        "bytes_moved": case.nbytes,
        "nominal_floor_ms": nominal_floor_ms(shape),
        "floor_ms": case.copy_ms,
        "copy_gbps": case.nbytes / (case.copy_ms * 1e-3) / 1e9,
    }
    print(f"\nshape {shape}: {case.nbytes / 1e9:.2f} GB moved; copy {case.copy_ms:.3f} ms", flush=True)
    print(f"{'variant':14s} {'config':44s} {'ms':>8s} {'GB/s':>7s} {'copy':>5s} {'max diff':>8s} ok", flush=True)
    rows = case.torch_rows(compile_too=not args.skip_compile)
    for row in rows:
        _print_row(row)
    by_name = {row["variant"]: row["ms"] for row in rows}
    record["eager_ms"], record["compile_ms"] = by_name.get("torch_eager"), by_name.get("torch_compile")
    measured: list[tuple[Config, dict[str, Any]]] = []
    for config in variant_configs():
        measured.append((config, case.kernel_row(module, config)))
        _print_row(measured[-1][1])
    for config in hint_configs(hint_targets(measured)):
        measured.append((config, case.kernel_row(module, config)))
        _print_row(measured[-1][1])
    record["rows"] = rows + [row for _, row in measured]
    return record


def best_kernel(rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest of our kernels' rows that passes the check (the torch rows left out)."""
    passing = [r for r in rows if not r["variant"].startswith("torch_") and r.get("ms") and r.get("allclose")]
    return min(passing, key=lambda r: r["ms"], default=None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--commit")
    parser.add_argument("--shape", type=int, nargs=4, metavar=("B", "C", "H", "W"))
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SHAPE}, then C=32, C=128, an odd H*W")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--skip-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument(
        "--dump-source", type=Path, metavar="PATH", help="write the CUDA source to PATH, the C++ side beside it, exit"
    )
    args = parser.parse_args(argv)

    shapes = case_shapes(args.shape, args.quick)
    if args.dump_source is not None:
        wrapper = args.dump_source.with_suffix(".cpp")
        args.dump_source.parent.mkdir(parents=True, exist_ok=True)
        args.dump_source.write_text(kernel_source(), encoding="utf-8")
        wrapper.write_text(TORCH_WRAPPER, encoding="utf-8")
        print(f"rmsnorm_nchw_probe: wrote {args.dump_source} (kernels, for nvcc) and {wrapper} (the C++ side)")
        return 0
    if not torch.cuda.is_available():
        print("rmsnorm_nchw_probe: needs a CUDA GPU (none visible to torch)", file=sys.stderr)
        return 2
    if any(size <= 0 for shape in shapes for size in shape) or args.iters < 1 or args.warmup < 0:
        print("rmsnorm_nchw_probe: sizes and --iters must be positive, --warmup not negative", file=sys.stderr)
        return 2
    from result_file import head_commit, write_result

    module, build_s = build(shape[1] for shape in shapes)
    print(f"{torch.cuda.get_device_name()}: extension built in {build_s:.1f} s", flush=True)
    cases: list[dict[str, Any]] = []
    for shape in shapes:
        cases.append(run_case(module, shape, args))
        torch.cuda.empty_cache()
        best = best_kernel(cases[-1]["rows"])
        if best is not None:
            print(
                f"best kernel: {best['variant']} {best['config']}: {best['ms']:.3f} ms, {best['fraction_of_copy']:.2f}"
                f" of the copy, {cases[-1]['nominal_floor_ms']:.3f} ms nominal floor",
                flush=True,
            )
        if args.out is not None:
            main_case, extra = cases[0], cases[1:]
            write_result(
                args.out,
                "rmsnorm_nchw_probe",
                head_commit(args.commit),
                torch=torch.__version__,
                settings={"warmup": args.warmup, "iters": args.iters, "flush_bytes": FLUSH_BYTES, "eps": EPS},
                build_s=build_s,
                **main_case,
                extra_cases=extra,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
