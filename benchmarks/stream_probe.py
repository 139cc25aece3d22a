"""Which CUDA kernel structure reaches the DRAM floor for two memory-bound classes where our generated kernels lose
to eager PyTorch on an H100:

1. element-wise over a huge tensor: KernelBench's level1/19_ReLU, ``torch.relu(x)`` on a float32 (4096, 393216)
   tensor (6.4 GB in, 6.4 GB out). Our kernel: a grid-stride loop, ``blocks_per_sm x SMs`` blocks of 512
   threads, each trip one 16-byte load, ReLU, one 16-byte store (4.46 ms; eager 4.25 ms).
2. a sum over a middle dim (a column reduction): KernelBench's level1/47_Sum_reduction_over_a_dimension,
   ``x.sum(dim=1, keepdim=True)`` on a float32 (128, 4096, 4095) tensor (8.6 GB read): the reduced dim strided
   by 4095 elements, the kept inner dim contiguous. Our kernel: one thread per output column (b, j),
   consecutive threads on consecutive j, a serial loop over the 4096 rows with a 4-byte load a trip and an fp64
   sum (3.46 ms), or a warp per column splitting the rows, combined in shared memory (3.20 ms).

One ``load_inline`` extension holds every structure below, each parameterised; every configuration is timed as
KernelBench times (CUDA events around each call, L2 flushed by a 256 MB write before each call, median), next to
eager PyTorch and ``torch.compile`` (default mode) in the same process.

Element-wise variants (ReLU; the flat tensor as float4s, its n % 4 trailing elements done one by one):

* ``a_gridstride``: the baseline: a persistent grid of blocks_per_sm (2, 4, 8) x SMs blocks of 512/256/128
  threads, one 16-byte load in flight a trip (``#pragma unroll 1``); ``loop=nvcc`` is the same source with the
  loop left to nvcc, which (plain hint only) unrolls it x4 and hoists the four loads above the stores
  (``ld.global.nc``: x is ``const __restrict__``), i.e. what our generator's plain loop may really compile to;
* ``b_gridstride_unroll``: the same grid with U (2, 4, 8) independent 16-byte loads written before any ReLU or
  store (a block covers U x block consecutive float4s a trip, thread t those at t, t + block, ...). ptxas keeps
  them first in SASS except for plain ReLU U=4, which it schedules as two loads, a store, two loads (sm_90, nvcc
  13.0; the hinted U=4 kernels keep all four first);
* ``c_oneshot``: no grid-stride loop: ceil(n / (4 U block)) blocks, each thread U float4s laid out as in (b)
  (PyTorch's vectorised element-wise kernel), block 128/256, U 1, 2, 4;
* (d): the fastest correct configuration of each of the two fastest of (a)-(c) again with cache hints (rows keep
  the structure's name, ``hint=`` in the config): ``stcs`` (``st.global.cs`` stores), ``ldcs`` (``ld.global.cs``
  loads), ``ldcs_stcs`` (both, ``__ldcs``/``__stcs``), ``nc256_stcs``
  (``ld.global.nc.L1::no_allocate.L2::256B`` + ``st.global.cs``). ``plain`` loads are already
  ``ld.global.nc``; plain stores ``st.global.v4``;
* SiLU (``x * sigmoid(x)``, ``expf`` and an IEEE divide, KernelBench's level1/25_Swish) on the fastest
  configuration (any hint) of the two fastest structures and on the fastest baseline, beside eager and compiled
  ``x * torch.sigmoid(x)``.

The floor is a measured copy (``out.copy_(x)``, the same bytes read and written); ``fraction_of_floor`` = copy
ms / row ms. x is KernelBench's ``torch.rand`` moved to [-1, 1) in place (on [0, 1) ReLU is a copy). Outputs
are poisoned with NaN before each checked run and compared in chunks with an exact (ReLU) or float64 (SiLU)
reference, ``torch.allclose`` at 1e-4.

Column-sum variants (``U=nvcc``: a plain row loop, unrolled as nvcc likes: four loads a trip in SASS; ``U=1``:
``#pragma unroll 1``; U > 1: U independent loads, then the adds; x is KernelBench's ``torch.rand``):

* ``a_thread_per_column``: the baseline, one thread per column, fp64 and fp32 sums, loop nvcc or strict,
  blocks of 128 and 256; ``a_warp_per_column``: today's 32-lane variant (a column's lanes are a warp's
  consecutive threads, lane l taking rows l, l + 32, ...; shared-memory combine), fp64 and fp32;
* ``b_unrolled``: one thread per column, U 4, 8, 16, into U accumulators or one;
* ``c_lanes``: L (4, 8, 16, 32) lanes per column, consecutive threads on consecutive columns (a warp reads along
  a row), lane l taking rows l, l + L, ..., U 1 or 4, combined through shared memory;
* ``d_vector``: each thread V (2, 4) adjacent columns with 8/16-byte loads, U 4 or 8, 1 or 4 lanes. Rows of a
  4095-wide tensor are not 8/16-byte aligned, so these run only on the separate (128, 4096, 4096) case (every
  other variant runs there too) and are ``no kernel`` rows on 4095;
* ``e_tile_splitk``: a block stages [R (32, 64) rows x C (64, 128) columns] tiles of its image in shared memory
  (a warp loads 32 consecutive floats of a row, R*C/256 loads in flight a thread; 16-byte loads where the inner
  dim is a multiple of 4, and then the staging transposes them), then each column's threads sum it; blocks split
  the rows S (1, 8) ways (split-K), write partial sums to a workspace, and a second kernel adds the S partials.

Every column output is checked against a float64 reference (``x[b0:b1].double().sum(1)``, a few images at a
time): ``max_abs_diff`` and ``ok`` = max abs diff <= 1e-4 x max |reference|. The floor is a read of x alone: the
fastest of a read-only kernel (a persistent grid of float4 loads summed into a 256-float sink; ``read_only``
rows) and torch's ``x.sum()`` (``torch_full_sum``); ``fraction_of_floor`` = floor ms / row ms, GB/s counts x
read and the output written. ``copy_based_floor_ms`` (bytes read / the bandwidth of a 1 GiB copy) is recorded
beside it.

    PYTHONPATH=src python benchmarks/stream_probe.py --out benchmarks/results/stream_probe_h100.json

Expected (not yet measured) about 2-3 minutes on an H100: building the extension (~1 min; torch caches it),
four ``torch.compile`` first calls (~10-20 s each; ``--skip-compile`` leaves them out) and ~180 timed
configurations (~40 s). One tensor at a time (peak ~27 GB, during eager SiLU: x, out, and eager's two
temporaries; each case records ``peak_memory_gb``).

``--quick``: (255, 65537) element-wise (n % 4 == 3: the tail), column sums over (8, 1024, 1023),
(8, 1024, 1024) and (4, 999, 1001) (rows no unroll divides, tiles cut short); ``--only elementwise|column``;
``--dump-source PATH`` writes the extension's CUDA source (kernels and a C launcher, no torch headers:
``nvcc -arch=sm_90 -c PATH`` builds it without a GPU) and its C++ side beside it, PATH with the suffix ``.cpp``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from probe_timing import FLUSH_BYTES, KERNELBENCH_TOLERANCE, build_extension, time_ms

sys.path.insert(0, str(Path(__file__).resolve().parent))

ELEMENTWISE_SHAPES: tuple[tuple[int, ...], ...] = ((4096, 393216),)
COLUMN_SHAPES: tuple[tuple[int, int, int], ...] = ((128, 4096, 4095), (128, 4096, 4096))
QUICK_ELEMENTWISE_SHAPES: tuple[tuple[int, ...], ...] = ((255, 65537),)  # 16711935 elements: a tail of 3
QUICK_COLUMN_SHAPES: tuple[tuple[int, int, int], ...] = ((8, 1024, 1023), (8, 1024, 1024), (4, 999, 1001))
H100_DRAM_BYTES_PER_S = 3.35e12  # H100 SXM's nominal HBM3 bandwidth
CHECK_CHUNK_BYTES = 512 * 1024 * 1024  # fp32 bytes of input per reference / comparison chunk
COPY_PROBE_FLOATS = 256 * 1024 * 1024  # the column case's copy-bandwidth probe: 1 GiB read, 1 GiB written
SINK_FLOATS = 256  # the read-only kernel's sink (the launcher's kSinkFloats)
MAX_SPLITS = 8  # the workspace holds this many partial sums a column

OPS = {"relu": 0, "silu": 1}
#: hint name -> the element-wise kernels' HINT template argument (loads; stores).
HINTS = {
    "plain": 0,  # ld.global.nc (x is const __restrict__) / st.global
    "stcs": 1,  # ld.global.nc / st.global.cs
    "ldcs": 2,  # ld.global.cs / st.global
    "ldcs_stcs": 3,  # ld.global.cs / st.global.cs
    "nc256_stcs": 4,  # ld.global.nc.L1::no_allocate.L2::256B / st.global.cs
}
#: element-wise variant -> the launcher's structure (0 grid-stride, 1 one-shot, 2 read-only).
EW_STRUCTURES = {"a_gridstride": 0, "b_gridstride_unroll": 0, "c_oneshot": 1, "read_only": 2}
COLUMN_VARIANTS = ("a_thread_per_column", "a_warp_per_column", "b_unrolled", "c_lanes", "d_vector", "e_tile_splitk")

CUDA_KERNELS = r"""
// The kernels of benchmarks/stream_probe.py; no torch headers (streamprobe_* take raw pointers).
// Element-wise: out = op(x) over a flat float32 tensor. Column sums: out[b, j] = sum_i x[b, i, j] of a contiguous
// (M, R, N) float32 tensor.
#include <cuda_runtime.h>
#include <climits>
#include <cstdint>

namespace streamprobe {

constexpr int kMaxBlock = 512;
constexpr int kTileBlock = 256;  // the tile kernel's block
constexpr int kSinkFloats = 256;

// HINT: 0 plain (ld.global.nc through const __restrict__; st.global), 1 st.global.cs, 2 ld.global.cs,
// 3 ld.global.cs + st.global.cs, 4 ld.global.nc.L1::no_allocate.L2::256B + st.global.cs.
template <int HINT>
__device__ __forceinline__ float4 ld4(const float* __restrict__ p) {
  const float4* q = reinterpret_cast<const float4*>(p);
  if constexpr (HINT == 2 || HINT == 3) {
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
__device__ __forceinline__ float ld1(const float* __restrict__ p) {
  if constexpr (HINT == 2 || HINT == 3) {
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
__device__ __forceinline__ void st4(float* __restrict__ p, float4 v) {
  if constexpr (HINT == 1 || HINT >= 3) {
    __stcs(reinterpret_cast<float4*>(p), v);
  } else {
    *reinterpret_cast<float4*>(p) = v;
  }
}

template <int HINT>
__device__ __forceinline__ void st1(float* __restrict__ p, float v) {
  if constexpr (HINT == 1 || HINT >= 3) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// OP: 0 ReLU, 1 SiLU (x * sigmoid(x), expf and an IEEE divide).
template <int OP>
__device__ __forceinline__ float apply(float v) {
  if constexpr (OP == 0) {
    return fmaxf(v, 0.0f);
  } else {
    return v * (1.0f / (1.0f + expf(-v)));
  }
}

template <int OP>
__device__ __forceinline__ float4 apply4(float4 v) {
  return make_float4(apply<OP>(v.x), apply<OP>(v.y), apply<OP>(v.z), apply<OP>(v.w));
}

// U * T consecutive float4s from float4 index i0 - threadIdx.x: this thread's are i, i + T, ..., i + (U-1) T,
// all U loaded before any op or store. A group entirely inside the nvec float4s takes no bounds checks.
template <int OP, int U, int HINT>
__device__ __forceinline__ void group(const float* __restrict__ x, float* __restrict__ out, long long i, long long T,
                                      long long nvec) {
  float4 v[U];
  if (i + (U - 1) * T < nvec) {
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld4<HINT>(x + 4 * (i + u * T));
#pragma unroll
    for (int u = 0; u < U; ++u) st4<HINT>(out + 4 * (i + u * T), apply4<OP>(v[u]));
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i + u * T < nvec) v[u] = ld4<HINT>(x + 4 * (i + u * T));
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * T < nvec) st4<HINT>(out + 4 * (i + u * T), apply4<OP>(v[u]));
  }
}

// The n % 4 trailing elements (from start = 4 * nvec), one each to the grid's first threads.
template <int OP, int HINT>
__device__ __forceinline__ void tail(const float* __restrict__ x, float* __restrict__ out, long long n,
                                     long long start) {
  const long long k = start + static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) st1<HINT>(out + k, apply<OP>(ld1<HINT>(x + k)));
}

// (a), (b): a persistent grid striding over the float4s, U * blockDim of them a block a trip. STRICT: one trip
// at a time (#pragma unroll 1), so a thread has exactly U loads in flight; otherwise nvcc unrolls as it likes.
template <int OP, int U, int HINT, bool STRICT>
__global__ void __launch_bounds__(kMaxBlock)
gridstride_kernel(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long nvec = n >> 2;
  const long long T = blockDim.x;
  const long long stride = T * U * gridDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * T * U + threadIdx.x;
  if constexpr (STRICT) {
#pragma unroll 1
    for (long long i = first; i < nvec; i += stride) group<OP, U, HINT>(x, out, i, T, nvec);
  } else {
    for (long long i = first; i < nvec; i += stride) group<OP, U, HINT>(x, out, i, T, nvec);
  }
  tail<OP, HINT>(x, out, n, nvec << 2);
}

// (c): one group a thread, enough blocks to cover the tensor (PyTorch's vectorised element-wise layout).
template <int OP, int U, int HINT>
__global__ void __launch_bounds__(kMaxBlock)
oneshot_kernel(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long nvec = n >> 2;
  const long long T = blockDim.x;
  group<OP, U, HINT>(x, out, static_cast<long long>(blockIdx.x) * T * U + threadIdx.x, T, nvec);
  tail<OP, HINT>(x, out, n, nvec << 2);
}

// The column class's read floor: a persistent grid reading x's float4s (U in flight a thread) and summing them;
// each warp adds its sum to one of kSinkFloats slots of sink, so no load can be dropped. The n % 4 trailing
// elements are not read.
template <int U>
__global__ void __launch_bounds__(kMaxBlock)
read_kernel(const float* __restrict__ x, float* __restrict__ sink, long long n) {
  const long long nvec = n >> 2;
  const long long T = blockDim.x;
  const long long stride = T * U * gridDim.x;
  float s = 0.0f;
#pragma unroll 1
  for (long long i = static_cast<long long>(blockIdx.x) * T * U + threadIdx.x; i < nvec; i += stride) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i + u * T < nvec) v[u] = ld4<0>(x + 4 * (i + u * T));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) {
    const unsigned warp = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    atomicAdd(sink + (warp % kSinkFloats), s);
  }
}

// VEC consecutive floats at p (aligned to 4 * VEC bytes) into v.
template <int VEC>
__device__ __forceinline__ void load_vec(const float* __restrict__ p, float* v) {
  if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else if constexpr (VEC == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x;
    v[1] = t.y;
  } else {
    static_assert(VEC == 1, "VEC is 1, 2 or 4");
    v[0] = *p;
  }
}

// (a)-(d): column group g (V adjacent columns j..j+V-1 of image b; N % V == 0) summed by L lanes, lane l taking
// rows l, l + L, ...; U == 0: a plain loop (nvcc unrolls it as it likes), U == 1: one load a trip, U > 1: U
// loads, then the adds (into U accumulators when MULTI, else one). L > 1: lanes combined through shared memory
// (blockDim * V ACCs). LANES_FAST: a column's lanes are consecutive threads (a warp per column when L == 32);
// otherwise consecutive threads take consecutive column groups (a warp reads along a row).
template <int V, int U, bool MULTI, typename ACC, bool LANES_FAST>
__global__ void __launch_bounds__(kMaxBlock)
col_kernel(const float* __restrict__ x, float* __restrict__ out, int M, int R, int N, int L) {
  extern __shared__ float4 col_smem[];
  constexpr int NACC = (MULTI && U > 1) ? U : 1;
  const int T = blockDim.x;
  const int C = T / L;  // column groups a block
  const int t = threadIdx.x;
  const int c = LANES_FAST ? t / L : t % C;
  const int l = LANES_FAST ? t % L : t / C;
  const unsigned per_row = static_cast<unsigned>(N / V);
  const unsigned g = blockIdx.x * static_cast<unsigned>(C) + static_cast<unsigned>(c);
  const bool active = g < static_cast<unsigned>(M) * per_row;
  const unsigned b = g / per_row;
  const int j = static_cast<int>(g - b * per_row) * V;
  ACC acc[NACC][V];
#pragma unroll
  for (int a = 0; a < NACC; ++a)
#pragma unroll
    for (int k = 0; k < V; ++k) acc[a][k] = ACC(0);
  if (active) {
    const long long step = static_cast<long long>(L) * N;
    const float* p = x + (static_cast<long long>(b) * R + l) * N + j;
    int i = l;
    if constexpr (U == 0) {
      for (; i < R; i += L, p += step) {
        float v[V];
        load_vec<V>(p, v);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[0][k] += static_cast<ACC>(v[k]);
      }
    } else {
      if constexpr (U > 1) {
#pragma unroll 1
        for (; i + (U - 1) * L < R; i += U * L, p += U * step) {
          float v[U][V];
#pragma unroll
          for (int u = 0; u < U; ++u) load_vec<V>(p + u * step, v[u]);
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int k = 0; k < V; ++k) acc[NACC > 1 ? u : 0][k] += static_cast<ACC>(v[u][k]);
        }
      }
#pragma unroll 1
      for (; i < R; i += L, p += step) {
        float v[V];
        load_vec<V>(p, v);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[0][k] += static_cast<ACC>(v[k]);
      }
    }
  }
  ACC s[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    s[k] = acc[0][k];
#pragma unroll
    for (int a = 1; a < NACC; ++a) s[k] += acc[a][k];
  }
  float* o = out + static_cast<long long>(b) * N + j;
  if (L == 1) {
    if (active) {
#pragma unroll
      for (int k = 0; k < V; ++k) o[k] = static_cast<float>(s[k]);
    }
    return;
  }
  ACC* part = reinterpret_cast<ACC*>(col_smem);  // [L][C][V]
#pragma unroll
  for (int k = 0; k < V; ++k) part[(l * C + c) * V + k] = s[k];
  __syncthreads();
  if (l == 0 && active) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      ACC total = ACC(0);
      for (int q = 0; q < L; ++q) total += part[(q * C + c) * V + k];
      o[k] = static_cast<float>(total);
    }
  }
}

// (e): TR x TC tiles of image b's columns j0..j0+TC staged in shared memory, rows [blockIdx.y * chunk,
// min(R, (blockIdx.y + 1) * chunk)) (split-K), then each column summed by P = 256 / TC threads. Loads: a warp
// reads 32 consecutive floats (VEC 1) or float4s (VEC 4: N % 4 == 0, x 16-byte aligned) of a row, K per thread
// per tile, all issued before the tile is stored. Each column's partial goes to ws[blockIdx.y][b][j].
template <int TR, int TC, int VEC>
__global__ void __launch_bounds__(kTileBlock)
tile_kernel(const float* __restrict__ x, float* __restrict__ ws, int M, int R, int N, int chunk) {
  constexpr int T = kTileBlock;
  constexpr int LC = TC / VEC;  // loaders along a tile row
  constexpr int LP = T / LC;    // tile rows one load step covers
  constexpr int K = TR / LP;    // loads a thread a tile
  constexpr int P = T / TC;     // threads summing one column of the tile
  static_assert(TC % VEC == 0 && T % LC == 0 && TR % LP == 0 && T % TC == 0 && TR % P == 0, "tile shape");
  __shared__ __align__(16) float tile[TR * TC];
  const int t = threadIdx.x;
  const int tiles_per_row = (N + TC - 1) / TC;
  const int b = blockIdx.x / tiles_per_row;
  const int j0 = (blockIdx.x - b * tiles_per_row) * TC;
  const int r0 = blockIdx.y * chunk;
  const int r1 = min(R, r0 + chunk);
  const int lc = (t % LC) * VEC;  // this thread's first column in the tile when loading
  const int lr = t / LC;          // and its first row
  const bool load_ok = j0 + lc < N;  // VEC 4: N % 4 == 0, so the whole vector is inside
  const float* xp = x + (static_cast<long long>(b) * R + lr) * N + j0 + lc;
  const int rc = t % TC;  // the column this thread sums
  const int rp = t / TC;  // from tile row rp, every P-th
  float acc = 0.0f;
  for (int r = r0; r < r1; r += TR) {
    float v[K][VEC];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (load_ok && r + lr + k * LP < r1) {
        load_vec<VEC>(xp + static_cast<long long>(r + k * LP) * N, v[k]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[k][e] = 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float* d = tile + (lr + k * LP) * TC + lc;
      if constexpr (VEC == 4) {
        *reinterpret_cast<float4*>(d) = make_float4(v[k][0], v[k][1], v[k][2], v[k][3]);
      } else {
        d[0] = v[k][0];
      }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < TR / P; ++q) acc += tile[(rp + q * P) * TC + rc];
    __syncthreads();
  }
  tile[rp * TC + rc] = acc;  // P * TC == T floats
  __syncthreads();
  if (rp == 0 && j0 + rc < N) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < P; ++q) s += tile[q * TC + rc];
    ws[(static_cast<long long>(blockIdx.y) * M + b) * N + j0 + rc] = s;
  }
}

// (e)'s second kernel: out[i] = the sum of the S partials ws[s][i], i < MN.
__global__ void __launch_bounds__(256)
combine_kernel(const float* __restrict__ ws, float* __restrict__ out, int MN, int S) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN) return;
  float s = 0.0f;
  for (int q = 0; q < S; ++q) s += ws[static_cast<long long>(q) * MN + i];
  out[i] = s;
}

inline bool aligned(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) & static_cast<uintptr_t>(bytes - 1)) == 0;
}

inline int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  return sms;
}

using EwKernel = void (*)(const float*, float*, long long);

template <int OP, int HINT>
EwKernel pick_op_hint(int structure, int unroll, bool strict) {
  if (structure == 0) {
    if (!strict) return unroll == 1 ? gridstride_kernel<OP, 1, HINT, false> : nullptr;
    switch (unroll) {
      case 1: return gridstride_kernel<OP, 1, HINT, true>;
      case 2: return gridstride_kernel<OP, 2, HINT, true>;
      case 4: return gridstride_kernel<OP, 4, HINT, true>;
      case 8: return gridstride_kernel<OP, 8, HINT, true>;
      default: return nullptr;
    }
  }
  if (structure == 1) {
    switch (unroll) {
      case 1: return oneshot_kernel<OP, 1, HINT>;
      case 2: return oneshot_kernel<OP, 2, HINT>;
      case 4: return oneshot_kernel<OP, 4, HINT>;
      default: return nullptr;
    }
  }
  return nullptr;
}

template <int OP>
EwKernel pick_op(int structure, int unroll, int hint, bool strict) {
  switch (hint) {
    case 0: return pick_op_hint<OP, 0>(structure, unroll, strict);
    case 1: return pick_op_hint<OP, 1>(structure, unroll, strict);
    case 2: return pick_op_hint<OP, 2>(structure, unroll, strict);
    case 3: return pick_op_hint<OP, 3>(structure, unroll, strict);
    case 4: return pick_op_hint<OP, 4>(structure, unroll, strict);
    default: return nullptr;
  }
}

inline EwKernel pick_read(int unroll) {
  switch (unroll) {
    case 1: return read_kernel<1>;
    case 4: return read_kernel<4>;
    case 8: return read_kernel<8>;
    default: return nullptr;
  }
}

struct Col {
  const float* x;
  float* out;
  float* ws;
  long long ws_numel;
  int M, R, N;
  int block, lanes, tile_rows, tile_cols, splits;
  cudaStream_t stream;
  long long* info;  // out: grid, block, dynamic smem bytes, vector loads (1/0), splits
};

inline int col_finish(const Col& c, long long grid, long long smem, bool vector, long long splits) {
  c.info[0] = grid;
  c.info[1] = c.block;
  c.info[2] = smem;
  c.info[3] = vector ? 1 : 0;
  c.info[4] = splits;
  return static_cast<int>(cudaGetLastError());
}

template <int V, int U, bool MULTI, typename ACC, bool LANES_FAST>
int launch_col(const Col& c) {
  const int L = c.lanes;
  if (L < 1 || L > c.block || c.block % L != 0) return -1;
  if (V > 1 && (c.N % V != 0 || !aligned(c.x, 4 * V))) return -1;
  const long long per_block = c.block / L;
  const long long groups = static_cast<long long>(c.M) * (c.N / V);
  const long long grid = (groups + per_block - 1) / per_block;
  const long long smem = L > 1 ? static_cast<long long>(c.block) * V * static_cast<long long>(sizeof(ACC)) : 0;
  if (grid > INT_MAX || smem > 48 * 1024) return -1;
  col_kernel<V, U, MULTI, ACC, LANES_FAST><<<static_cast<unsigned>(grid), c.block, static_cast<size_t>(smem),
                                             c.stream>>>(c.x, c.out, c.M, c.R, c.N, L);
  return col_finish(c, grid, smem, V > 1, 1);
}

template <int TR, int TC>
int launch_tile(const Col& c) {
  if (c.block != kTileBlock || c.splits < 1) return -1;
  const long long per_split = (static_cast<long long>(c.R) + c.splits - 1) / c.splits;
  const long long chunk = (per_split + TR - 1) / TR * TR;
  const long long splits = (c.R + chunk - 1) / chunk;  // no split left empty
  const long long mn = static_cast<long long>(c.M) * c.N;
  const long long gx = static_cast<long long>(c.M) * ((c.N + TC - 1) / TC);
  if (splits * mn > c.ws_numel || gx > INT_MAX || splits > 65535 || chunk > INT_MAX) return -1;
  const bool vector = c.N % 4 == 0 && aligned(c.x, 16);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
  if (vector) {
    tile_kernel<TR, TC, 4><<<grid, kTileBlock, 0, c.stream>>>(c.x, c.ws, c.M, c.R, c.N, static_cast<int>(chunk));
  } else {
    tile_kernel<TR, TC, 1><<<grid, kTileBlock, 0, c.stream>>>(c.x, c.ws, c.M, c.R, c.N, static_cast<int>(chunk));
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return static_cast<int>(e);
  combine_kernel<<<static_cast<unsigned>((mn + 255) / 256), 256, 0, c.stream>>>(c.ws, c.out, static_cast<int>(mn),
                                                                                 static_cast<int>(splits));
  return col_finish(c, gx * splits, 0, vector, splits);
}

// flags: 1 fp64 sum, 2 U accumulators, 4 lanes on consecutive threads; only the combinations the probe runs.
inline int pick_col(const Col& c, int vec, int unroll, int flags) {
  const bool acc64 = (flags & 1) != 0, multi = (flags & 2) != 0, lanes_fast = (flags & 4) != 0;
  if (acc64) {
    if (vec != 1 || multi) return -1;
    if (lanes_fast) return unroll == 0 ? launch_col<1, 0, false, double, true>(c) : -1;
    switch (unroll) {
      case 0: return launch_col<1, 0, false, double, false>(c);
      case 1: return launch_col<1, 1, false, double, false>(c);
      default: return -1;
    }
  }
  if (lanes_fast) return (vec == 1 && unroll == 0 && !multi) ? launch_col<1, 0, false, float, true>(c) : -1;
  if (vec == 1 && !multi) {
    switch (unroll) {
      case 0: return launch_col<1, 0, false, float, false>(c);
      case 1: return launch_col<1, 1, false, float, false>(c);
      case 4: return launch_col<1, 4, false, float, false>(c);
      case 8: return launch_col<1, 8, false, float, false>(c);
      case 16: return launch_col<1, 16, false, float, false>(c);
      default: return -1;
    }
  }
  if (vec == 1) {
    switch (unroll) {
      case 4: return launch_col<1, 4, true, float, false>(c);
      case 8: return launch_col<1, 8, true, float, false>(c);
      case 16: return launch_col<1, 16, true, float, false>(c);
      default: return -1;
    }
  }
  if (multi) return -1;
  if (vec == 2 && unroll == 4) return launch_col<2, 4, false, float, false>(c);
  if (vec == 2 && unroll == 8) return launch_col<2, 8, false, float, false>(c);
  if (vec == 4 && unroll == 4) return launch_col<4, 4, false, float, false>(c);
  if (vec == 4 && unroll == 8) return launch_col<4, 8, false, float, false>(c);
  return -1;
}

}  // namespace streamprobe

// The C interface the extension's C++ side (TORCH_WRAPPER, built by the host compiler) calls. Each returns 0 on
// success, -1 for a configuration this source has no kernel for (nothing ran), else the launch's cudaError_t.

// structure: 0 grid-stride (blocks_per_sm x SMs blocks), 1 one-shot, 2 read-only (out: a kSinkFloats sink, op
// and hint ignored). x and out 16-byte aligned. info (2 slots): grid, block.
extern "C" int streamprobe_elementwise(const float* x, float* out, long long n, int structure, int op, int block,
                                       int unroll, int blocks_per_sm, int hint, int strict, void* stream,
                                       long long* info) {
  using namespace streamprobe;
  if (block < 32 || block > kMaxBlock || block % 32 != 0 || n <= 0) return -1;
  if (!aligned(x, 16) || !aligned(out, 16)) return -1;
  EwKernel kernel = nullptr;
  if (structure == 2) {
    kernel = pick_read(unroll);
  } else if (op == 0) {
    kernel = pick_op<0>(structure, unroll, hint, strict != 0);
  } else if (op == 1) {
    kernel = pick_op<1>(structure, unroll, hint, strict != 0);
  }
  if (kernel == nullptr) return -1;
  long long grid = 0;
  if (structure == 1) {
    const long long per_block = static_cast<long long>(block) * unroll;
    grid = ((n >> 2) + per_block - 1) / per_block;
  } else {
    grid = static_cast<long long>(blocks_per_sm) * sm_count();
  }
  if (grid < 1) grid = 1;  // n < 4: the tail alone
  if (grid > INT_MAX) return -1;
  kernel<<<static_cast<unsigned>(grid), block, 0, static_cast<cudaStream_t>(stream)>>>(x, out, n);
  info[0] = grid;
  info[1] = block;
  return static_cast<int>(cudaGetLastError());
}

// x: (M, R, N) contiguous, out: M * N floats, ws: ws_numel floats (the tile kernel's partial sums).
// kind 0: col_kernel (vec, unroll, lanes, flags); kind 1: the split-K tile (tile_rows x tile_cols, splits; block
// 256). info (5 slots): grid, block, dynamic smem bytes, vector loads (1/0), splits used.
extern "C" int streamprobe_column(const float* x, float* out, float* ws, long long ws_numel, long long M, long long R,
                                  long long N, int kind, int block, int vec, int unroll, int lanes, int flags,
                                  int tile_rows, int tile_cols, int splits, void* stream, long long* info) {
  using namespace streamprobe;
  if (block < 32 || block > kMaxBlock || block % 32 != 0) return -1;
  if (M <= 0 || R <= 0 || N <= 0 || M * N > INT_MAX || R > INT_MAX) return -1;
  const Col c{x, out, ws, ws_numel, static_cast<int>(M), static_cast<int>(R), static_cast<int>(N), block, lanes,
              tile_rows, tile_cols, splits, static_cast<cudaStream_t>(stream), info};
  if (kind == 0) return pick_col(c, vec, unroll, flags);
  if (kind != 1) return -1;
  if (tile_rows == 32 && tile_cols == 64) return launch_tile<32, 64>(c);
  if (tile_rows == 32 && tile_cols == 128) return launch_tile<32, 128>(c);
  if (tile_rows == 64 && tile_cols == 64) return launch_tile<64, 64>(c);
  if (tile_rows == 64 && tile_cols == 128) return launch_tile<64, 128>(c);
  return -1;
}

extern "C" const char* streamprobe_error(int status) {
  return cudaGetErrorString(static_cast<cudaError_t>(status));
}
"""

TORCH_WRAPPER = r"""
// The extension's C++ side: tensors in, raw pointers to the kernels' C interface (the CUDA source has no torch
// headers, so nvcc builds it in seconds while the host compiler builds this file and its bindings).
#include <torch/extension.h>
#include <vector>

extern "C" int streamprobe_elementwise(const float* x, float* out, long long n, int structure, int op, int block,
                                       int unroll, int blocks_per_sm, int hint, int strict, void* stream,
                                       long long* info);
extern "C" int streamprobe_column(const float* x, float* out, float* ws, long long ws_numel, long long M, long long R,
                                  long long N, int kind, int block, int vec, int unroll, int lanes, int flags,
                                  int tile_rows, int tile_cols, int splits, void* stream, long long* info);
extern "C" const char* streamprobe_error(int status);

static void check_float(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat && t.is_contiguous(), name,
              " must be a contiguous float32 CUDA tensor");
}

// [status, grid, block]; status -1: no kernel for this configuration (nothing ran).
// structure 2 (read-only): out is the sink (at least 256 floats). stream: torch.cuda.current_stream().cuda_stream.
std::vector<int64_t> elementwise(torch::Tensor x, torch::Tensor out, int64_t structure, int64_t op, int64_t block,
                                 int64_t unroll, int64_t blocks_per_sm, int64_t hint, int64_t strict, int64_t stream) {
  check_float(x, "x");
  check_float(out, "out");
  if (structure == 2) {
    TORCH_CHECK(out.numel() >= 256, "the sink holds 256 floats");
  } else {
    TORCH_CHECK(x.sizes() == out.sizes(), "x and out differ in shape");
  }
  long long info[2] = {0, 0};
  const int status = streamprobe_elementwise(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(),
                                             static_cast<int>(structure), static_cast<int>(op),
                                             static_cast<int>(block), static_cast<int>(unroll),
                                             static_cast<int>(blocks_per_sm), static_cast<int>(hint),
                                             static_cast<int>(strict), reinterpret_cast<void*>(stream), info);
  TORCH_CHECK(status <= 0, "launch failed: ", streamprobe_error(status));
  return {status, info[0], info[1]};
}

// [status, grid, block, smem bytes, vector loads, splits]; x: (M, R, N), out: M * N floats, ws: the workspace.
std::vector<int64_t> column(torch::Tensor x, torch::Tensor out, torch::Tensor ws, int64_t kind, int64_t block,
                            int64_t vec, int64_t unroll, int64_t lanes, int64_t flags, int64_t tile_rows,
                            int64_t tile_cols, int64_t splits, int64_t stream) {
  check_float(x, "x");
  check_float(out, "out");
  check_float(ws, "ws");
  TORCH_CHECK(x.dim() == 3, "x: (M, R, N)");
  const int64_t M = x.size(0), R = x.size(1), N = x.size(2);
  TORCH_CHECK(out.numel() == M * N, "out: M * N floats");
  long long info[5] = {0, 0, 0, 0, 0};
  const int status = streamprobe_column(x.data_ptr<float>(), out.data_ptr<float>(), ws.data_ptr<float>(), ws.numel(),
                                        M, R, N, static_cast<int>(kind), static_cast<int>(block),
                                        static_cast<int>(vec), static_cast<int>(unroll), static_cast<int>(lanes),
                                        static_cast<int>(flags), static_cast<int>(tile_rows),
                                        static_cast<int>(tile_cols), static_cast<int>(splits),
                                        reinterpret_cast<void*>(stream), info);
  TORCH_CHECK(status <= 0, "launch failed: ", streamprobe_error(status));
  return {status, info[0], info[1], info[2], info[3], info[4]};
}
"""


# --------------------------------------------------------------------------------------------------------------
# Configurations


@dataclass(frozen=True)
class EwConfig:
    """One element-wise (or read-only) configuration: ``blocks_per_sm`` sizes a grid-stride grid (0: one-shot);
    ``strict`` keeps a grid-stride loop at one trip at a time (False: nvcc unrolls the U=1 loop itself)."""

    variant: str
    block: int
    unroll: int = 1
    blocks_per_sm: int = 0
    strict: bool = True
    hint: str = "plain"
    op: str = "relu"

    @property
    def structure(self) -> int:
        return EW_STRUCTURES[self.variant]

    def label(self) -> str:
        grid = f"grid={self.blocks_per_sm}xSM" if self.blocks_per_sm else "grid=cover"
        loop = "" if self.strict else " loop=nvcc"
        return f"{self.op} block={self.block} U={self.unroll} {grid}{loop} hint={self.hint}"


@dataclass(frozen=True)
class ColConfig:
    """One column-sum configuration. ``unroll`` 0: a plain row loop nvcc unrolls itself; 1: one load a trip;
    U > 1: U loads, then the adds. ``lanes``: threads a column (group of ``vec`` adjacent columns). The tile
    kernel (``e_tile_splitk``) uses ``tile_rows``, ``tile_cols`` and ``splits``."""

    variant: str
    block: int = 256
    unroll: int = 0
    lanes: int = 1
    vec: int = 1
    acc64: bool = False
    multi_acc: bool = False
    lanes_fast: bool = False
    tile_rows: int = 0
    tile_cols: int = 0
    splits: int = 1

    @property
    def kind(self) -> int:
        return 1 if self.variant == "e_tile_splitk" else 0

    @property
    def flags(self) -> int:
        """The launcher's ``flags``: 1 fp64 sum, 2 U accumulators, 4 a column's lanes on consecutive threads."""
        return int(self.acc64) | 2 * int(self.multi_acc) | 4 * int(self.lanes_fast)

    def label(self) -> str:
        if self.kind == 1:
            return f"tile={self.tile_rows}x{self.tile_cols} splits={self.splits} block={self.block}"
        unroll = "nvcc" if self.unroll == 0 else str(self.unroll)
        accs = f"x{self.unroll}" if self.multi_acc else "x1"
        parts = [f"V={self.vec}", f"L={self.lanes}", f"U={unroll}", f"block={self.block}"]
        parts.append(f"acc={'fp64' if self.acc64 else 'fp32'}{accs}")
        if self.lanes_fast:
            parts.append("lanes=consecutive")
        return " ".join(parts)

    def supports(self, shape: Sequence[int]) -> str | None:
        """Why this configuration has no kernel for ``shape`` (None: it has one)."""
        if self.vec > 1 and shape[2] % self.vec:
            return f"no kernel: N % {self.vec} != 0 (rows not {4 * self.vec}-byte aligned)"
        return None


def elementwise_configs() -> list[EwConfig]:
    """(a)-(c) on ReLU without hints; (d) and SiLU come from :func:`hint_configs` and :func:`silu_configs`."""
    grids, blocks = (2, 4, 8), (512, 256, 128)
    configs = [EwConfig("a_gridstride", b, 1, g) for g in grids for b in blocks]
    configs += [EwConfig("a_gridstride", b, 1, g, strict=False) for g in grids for b in blocks]
    configs += [EwConfig("b_gridstride_unroll", b, u, g) for u in (2, 4, 8) for g in grids for b in blocks]
    configs += [EwConfig("c_oneshot", b, u) for u in (1, 2, 4) for b in (128, 256)]
    return configs


def read_configs() -> list[EwConfig]:
    """The read-only kernel's grid-stride configurations; the fastest is the column class's read floor."""
    return [EwConfig("read_only", b, u, g, op="read") for u in (4, 8) for g in (4, 8) for b in (256, 512)]


def column_configs() -> list[ColConfig]:
    """(a)-(e); the vector variants (d) have kernels only where N is a multiple of V."""
    configs = [
        ColConfig("a_thread_per_column", block, unroll, acc64=acc64)
        for acc64 in (True, False)
        for unroll in (0, 1)
        for block in (128, 256)
    ]
    configs += [
        ColConfig("a_warp_per_column", 256, 0, lanes=32, acc64=acc64, lanes_fast=True) for acc64 in (True, False)
    ]
    configs += [
        ColConfig("b_unrolled", block, unroll, multi_acc=multi)
        for unroll in (4, 8, 16)
        for multi in (True, False)
        for block in (128, 256)
    ]
    configs += [ColConfig("c_lanes", 256, unroll, lanes=lanes) for lanes in (4, 8, 16, 32) for unroll in (1, 4)]
    configs += [
        ColConfig("d_vector", 256, unroll, lanes=lanes, vec=vec)
        for vec in (2, 4)
        for unroll in (4, 8)
        for lanes in (1, 4)
    ]
    configs += [
        ColConfig("e_tile_splitk", 256, tile_rows=rows, tile_cols=cols, splits=splits)
        for rows in (32, 64)
        for cols in (64, 128)
        for splits in (1, MAX_SPLITS)
    ]
    return configs


def _passing(measured: Iterable[tuple[EwConfig, dict[str, Any]]]) -> list[tuple[float, EwConfig]]:
    return sorted(
        ((row["ms"], config) for config, row in measured if row.get("ms") is not None and row.get("ok")),
        key=lambda pair: pair[0],
    )


def family(variant: str) -> str:
    """A variant's structure letter: ``a``, ``b``, ``c``..."""
    return variant.split("_")[0]


def fastest_by_family(
    measured: Iterable[tuple[EwConfig, dict[str, Any]]], count: int = 2, plain_only: bool = True
) -> list[EwConfig]:
    """The fastest passing ReLU configuration of each of the ``count`` fastest structures (plain hints only
    unless told)."""
    chosen: list[EwConfig] = []
    seen: set[str] = set()
    for _, config in _passing(measured):
        if config.op != "relu" or (plain_only and config.hint != "plain") or family(config.variant) in seen:
            continue
        seen.add(family(config.variant))
        chosen.append(config)
        if len(chosen) == count:
            break
    return chosen


def hint_configs(targets: Iterable[EwConfig]) -> list[EwConfig]:
    """(d): each target again under every cache hint."""
    return [replace(t, hint=hint) for t in targets for hint in HINTS if hint != "plain"]


def silu_configs(measured: Sequence[tuple[EwConfig, dict[str, Any]]]) -> list[EwConfig]:
    """SiLU on the fastest configuration (any hint) of the two fastest structures, then on the fastest plain
    baseline (a) unless it is one of those."""
    targets = fastest_by_family(measured, 2, plain_only=False)
    baseline = [c for _, c in _passing(measured) if c.variant == "a_gridstride" and c.hint == "plain"]
    if baseline and baseline[0] not in targets:
        targets.append(baseline[0])
    return [replace(t, op="silu") for t in targets]


# --------------------------------------------------------------------------------------------------------------
# Shapes, bytes, references


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def case_shapes(quick: bool, only: str | None = None) -> dict[str, list[tuple[int, ...]]]:
    """The shapes a run measures, by class."""
    shapes: dict[str, list[tuple[int, ...]]] = {
        "elementwise": list(QUICK_ELEMENTWISE_SHAPES if quick else ELEMENTWISE_SHAPES),
        "column": list(QUICK_COLUMN_SHAPES if quick else COLUMN_SHAPES),
    }
    return {k: v for k, v in shapes.items() if only is None or k == only}


def elementwise_bytes(shape: Sequence[int]) -> int:
    """Bytes an element-wise kernel must move: the fp32 input read once, the output written once."""
    return 8 * numel(shape)


def column_bytes(shape: Sequence[int]) -> int:
    """Bytes a column sum must move: x read once, the (M, 1, N) output written once."""
    m, _, n = shape
    return 4 * numel(shape) + 4 * m * n


def nominal_floor_ms(nbytes: int, bytes_per_s: float = H100_DRAM_BYTES_PER_S) -> float:
    return nbytes / bytes_per_s * 1e3


def chunk_rows(shape: Sequence[int], chunk_bytes: int | None = None) -> int:
    """Leading-dim slices per reference / comparison chunk (at least one), ``CHECK_CHUNK_BYTES`` of input."""
    per_row = 4 * numel(shape[1:])
    return max(1, (CHECK_CHUNK_BYTES if chunk_bytes is None else chunk_bytes) // max(1, per_row))


def torch_relu(x: torch.Tensor) -> torch.Tensor:
    """KernelBench's level1/19_ReLU."""
    return torch.relu(x)


def torch_silu(x: torch.Tensor) -> torch.Tensor:
    """KernelBench's level1/25_Swish."""
    return x * torch.sigmoid(x)


def torch_column_sum(x: torch.Tensor) -> torch.Tensor:
    """KernelBench's level1/47_Sum_reduction_over_a_dimension (dim 1)."""
    return torch.sum(x, dim=1, keepdim=True)


TORCH_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": torch_relu, "silu": torch_silu}


def elementwise_reference(x: torch.Tensor, op: str) -> torch.Tensor:
    """ReLU exactly; SiLU in float64, rounded to fp32."""
    if op == "relu":
        return torch.relu(x)
    xd = x.double()
    return (xd * torch.sigmoid(xd)).float()


def compare_elementwise(x: torch.Tensor, out: torch.Tensor, op: str) -> dict[str, Any]:
    """The largest difference from the reference and ``torch.allclose`` at 1e-4, a few rows at a time."""
    step = chunk_rows(x.shape)
    worst, close = 0.0, True
    for start in range(0, x.shape[0], step):
        want = elementwise_reference(x[start : start + step], op)
        got = out[start : start + step]
        diff = float((got - want).abs().max())
        worst = math.nan if math.isnan(diff) or math.isnan(worst) else max(worst, diff)  # a NaN stays
        close = close and bool(torch.allclose(got, want, atol=KERNELBENCH_TOLERANCE, rtol=KERNELBENCH_TOLERANCE))
        del want
    return {"max_abs_diff": worst, "ok": close}


def column_reference(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(1, keepdim=True)`` in float64, a few images at a time."""
    m, _, n = x.shape
    ref = torch.empty((m, 1, n), dtype=torch.float64, device=x.device)
    step = chunk_rows(x.shape)
    for start in range(0, m, step):
        ref[start : start + step] = x[start : start + step].double().sum(1, keepdim=True)
    return ref


def compare_column(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """Max abs diff from the float64 reference; ``ok``: within 1e-4 of the reference's largest magnitude."""
    diff = float((out.reshape(ref.shape).double() - ref).abs().max())
    scale = float(ref.abs().max())
    rel = diff / scale if scale > 0 else diff
    ok = not math.isnan(diff) and rel <= KERNELBENCH_TOLERANCE
    return {"max_abs_diff": diff, "rel_diff": rel, "ok": ok}


def best_kernel(rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest of our kernels' rows that passes its check (torch and read-only rows left out)."""
    ours = [
        r
        for r in rows
        if not r["variant"].startswith("torch_") and r["variant"] != "read_only" and r.get("ms") and r.get("ok")
    ]
    return min(ours, key=lambda r: r["ms"], default=None)


def kernel_source() -> str:
    """The kernels and their C launcher alone (no torch headers)."""
    return CUDA_KERNELS


# --------------------------------------------------------------------------------------------------------------
# Timing and the GPU cases


def build() -> tuple[Any, float]:
    """The extension and the seconds its build took (:func:`probe_timing.build_extension`)."""
    return build_extension("stream_probe_", kernel_source(), TORCH_WRAPPER, ["elementwise", "column"])


class Case:
    """One shape's timing context: an L2 flush buffer, the floor, and the row format."""

    def __init__(self, shape: tuple[int, ...], nbytes: int, warmup: int, iters: int) -> None:
        self.shape = shape
        self.nbytes = nbytes
        self.warmup, self.iters = warmup, iters
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.floor_ms = math.nan

    def time(self, fn: Callable[[], object]) -> float:
        return time_ms(fn, self.flush, self.warmup, self.iters)

    def row(self, variant: str, config: str, ms: float | None, **extra: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"variant": variant, "config": config, "ms": ms}
        row["gbps"] = self.nbytes / (ms * 1e-3) / 1e9 if ms else None
        row["fraction_of_floor"] = self.floor_ms / ms if ms else None
        row.update(extra)
        return row

    def compiled_row(self, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, config: str) -> dict[str, Any]:
        """``torch.compile`` (default mode) of ``fn``, compiled afresh, timed; its output in ``output``."""
        try:
            torch._dynamo.reset()  # KernelBench compiles per problem
            compiled = torch.compile(fn)
            with torch.no_grad():
                row = self.row("torch_compile", config, self.time(lambda: compiled(x)))
                row["output"] = compiled(x)
            return row
        except Exception as error:  # record why, and go on with the kernels
            return self.row("torch_compile", config, None, note=f"error: {error}"[:200])


class ElementwiseCase(Case):
    """x = rand(shape) in [-1, 1) (KernelBench's [0, 1) would make ReLU a copy), out, and the copy floor."""

    def __init__(self, shape: tuple[int, ...], warmup: int, iters: int) -> None:
        super().__init__(shape, elementwise_bytes(shape), warmup, iters)
        torch.manual_seed(42)
        self.x = torch.rand(shape, device="cuda").mul_(2).sub_(1)  # KernelBench's rand, moved to [-1, 1)
        self.out = torch.empty_like(self.x)
        self.floor_ms = self.time(lambda: self.out.copy_(self.x))

    def torch_rows(self, op: str, compile_too: bool) -> list[dict[str, Any]]:
        """Eager PyTorch, then ``torch.compile``, each checked."""
        fn = TORCH_OPS[op]
        with torch.no_grad():
            rows = [self.row("torch_eager", op, self.time(lambda: fn(self.x)))]
            rows[-1].update(compare_elementwise(self.x, fn(self.x), op))
        torch.cuda.empty_cache()
        if compile_too:
            rows.append(self.compiled_row(fn, self.x, op))
            output = rows[-1].pop("output", None)
            if output is not None:
                rows[-1].update(compare_elementwise(self.x, output, op))
            del output
            torch.cuda.empty_cache()
        return rows

    def kernel_row(self, module: Any, config: EwConfig) -> dict[str, Any]:
        """``config`` checked once (on an output poisoned with NaN), then timed."""
        self.out.fill_(float("nan"))  # a kernel that skips an element fails the check
        stream = torch.cuda.current_stream().cuda_stream
        args = (self.x, self.out, config.structure, OPS[config.op], config.block, config.unroll)
        launch = (*args, config.blocks_per_sm, HINTS[config.hint], int(config.strict), stream)
        status, grid, block = module.elementwise(*launch)
        if status != 0:
            return self.row(config.variant, config.label(), None, note="no kernel for this config")
        torch.cuda.synchronize()
        check = compare_elementwise(self.x, self.out, config.op)
        ms = self.time(lambda: module.elementwise(*launch))
        return self.row(config.variant, config.label(), ms, **check, grid=grid, block=block)


class ColumnCase(Case):
    """x = rand(shape) (KernelBench's input), out (M, 1, N), the workspace, the float64 reference, the read floor."""

    def __init__(self, shape: tuple[int, int, int], warmup: int, iters: int) -> None:
        super().__init__(shape, column_bytes(shape), warmup, iters)
        torch.manual_seed(42)
        m, _, n = shape
        self.x = torch.rand(shape, device="cuda")
        self.out = torch.empty((m, 1, n), device="cuda")
        self.ws = torch.empty(MAX_SPLITS * m * n, device="cuda")
        self.sink = torch.zeros(SINK_FLOATS, device="cuda")
        self.ref = column_reference(self.x)
        self.copy_gbps = math.nan  # set by floor_rows

    def floor_rows(self, module: Any) -> list[dict[str, Any]]:
        """The read-only kernel's configurations and torch's full ``x.sum()``; the fastest sets the floor. Also
        the bandwidth of a 1 GiB copy, for ``copy_based_floor_ms``."""
        rows: list[dict[str, Any]] = []
        stream = torch.cuda.current_stream().cuda_stream
        read_bytes = 4 * self.x.numel()
        for config in read_configs():
            launch = (self.x, self.sink, 2, 0, config.block, config.unroll, config.blocks_per_sm, 0, 1, stream)
            status, grid, block = module.elementwise(*launch)
            ms = self.time(lambda launch=launch: module.elementwise(*launch)) if status == 0 else None
            rows.append(self.row("read_only", config.label(), ms, grid=grid, block=block))
        with torch.no_grad():
            rows.append(self.row("torch_full_sum", "x.sum()", self.time(lambda: self.x.sum())))
        for row in rows:
            row["gbps"] = read_bytes / (row["ms"] * 1e-3) / 1e9 if row["ms"] else None
        self.floor_ms = min(r["ms"] for r in rows if r["ms"])
        for row in rows:
            row["fraction_of_floor"] = self.floor_ms / row["ms"] if row["ms"] else None
        count = min(self.x.numel(), COPY_PROBE_FLOATS)
        source = self.x.view(-1)[:count]
        target = torch.empty_like(source)
        self.copy_gbps = 8 * count / (self.time(lambda: target.copy_(source)) * 1e-3) / 1e9
        return rows

    def torch_rows(self, compile_too: bool) -> list[dict[str, Any]]:
        with torch.no_grad():
            rows = [self.row("torch_eager", "sum(dim=1)", self.time(lambda: torch_column_sum(self.x)))]
            rows[-1].update(compare_column(torch_column_sum(self.x), self.ref))
        if compile_too:
            rows.append(self.compiled_row(torch_column_sum, self.x, "sum(dim=1)"))
            output = rows[-1].pop("output", None)
            if output is not None:
                rows[-1].update(compare_column(output, self.ref))
        torch.cuda.empty_cache()
        return rows

    def kernel_row(self, module: Any, config: ColConfig) -> dict[str, Any]:
        why = config.supports(self.shape)
        if why is not None:
            return self.row(config.variant, config.label(), None, note=why)
        self.out.fill_(float("nan"))
        stream = torch.cuda.current_stream().cuda_stream
        args = (self.x, self.out, self.ws, config.kind, config.block, config.vec, config.unroll, config.lanes)
        launch = (*args, config.flags, config.tile_rows, config.tile_cols, config.splits, stream)
        status, grid, block, smem, vector, splits = module.column(*launch)
        if status != 0:
            return self.row(config.variant, config.label(), None, note="no kernel for this config")
        torch.cuda.synchronize()
        check = compare_column(self.out, self.ref)
        ms = self.time(lambda: module.column(*launch))
        extra = {"grid": grid, "block": block, "smem_bytes": smem, "vector_loads": bool(vector), "splits": splits}
        return self.row(config.variant, config.label(), ms, **check, **extra)


# --------------------------------------------------------------------------------------------------------------
# Running


def _print_header() -> None:
    print(f"{'variant':20s} {'config':54s} {'ms':>8s} {'GB/s':>7s} {'floor':>5s} {'max diff':>8s} ok", flush=True)


def _print_row(row: dict[str, Any]) -> None:
    def cell(key: str, spec: str, width: int) -> str:
        return format(row[key], spec) if row.get(key) is not None else "-".rjust(width)

    ok = {True: "ok", False: "FAIL", None: "-"}[row.get("ok")]
    where = f"grid={row['grid']}" if row.get("grid") else row.get("note", "")
    print(
        f"{row['variant']:20s} {row['config']:54s} {cell('ms', '8.3f', 8)} {cell('gbps', '7.0f', 7)} "
        f"{cell('fraction_of_floor', '5.2f', 5)} {cell('max_abs_diff', '8.1e', 8)} {ok:4s} {where}",
        flush=True,
    )


def _torch_ms(rows: Iterable[dict[str, Any]], variant: str, config: str) -> float | None:
    return next((r["ms"] for r in rows if r["variant"] == variant and r["config"] == config), None)


def run_elementwise(module: Any, shape: tuple[int, ...], args: argparse.Namespace) -> dict[str, Any]:
    """ReLU: torch rows, (a)-(c), (d) hints; then SiLU: torch rows and the chosen configurations."""
    case = ElementwiseCase(shape, args.warmup, args.iters)
    record: dict[str, Any] = {
        "shape": list(shape),
        "bytes_moved": case.nbytes,
        "nominal_floor_ms": nominal_floor_ms(case.nbytes),
        "floor_ms": case.floor_ms,
        "floor": "out.copy_(x): the same bytes read and written",
        "copy_gbps": case.nbytes / (case.floor_ms * 1e-3) / 1e9,
    }
    print(f"\nelement-wise {shape}: {case.nbytes / 1e9:.2f} GB moved; copy {case.floor_ms:.3f} ms", flush=True)
    _print_header()
    rows = case.torch_rows("relu", compile_too=not args.skip_compile)
    for row in rows:
        _print_row(row)
    measured: list[tuple[EwConfig, dict[str, Any]]] = []
    for config in elementwise_configs():
        measured.append((config, case.kernel_row(module, config)))
        _print_row(measured[-1][1])
    for config in hint_configs(fastest_by_family(measured)):
        measured.append((config, case.kernel_row(module, config)))
        _print_row(measured[-1][1])
    silu_rows = case.torch_rows("silu", compile_too=not args.skip_compile)
    for row in silu_rows:
        _print_row(row)
    for config in silu_configs(measured):
        measured.append((config, case.kernel_row(module, config)))
        _print_row(measured[-1][1])
    rows += silu_rows
    record["eager_ms"] = _torch_ms(rows, "torch_eager", "relu")
    record["compile_ms"] = _torch_ms(rows, "torch_compile", "relu")
    record["silu_eager_ms"] = _torch_ms(rows, "torch_eager", "silu")
    record["silu_compile_ms"] = _torch_ms(rows, "torch_compile", "silu")
    record["rows"] = rows + [row for _, row in measured]
    del case
    torch.cuda.empty_cache()
    return record


def run_column(module: Any, shape: tuple[int, int, int], args: argparse.Namespace) -> dict[str, Any]:
    """The read floor, torch rows, then (a)-(e)."""
    case = ColumnCase(shape, args.warmup, args.iters)
    floor_rows = case.floor_rows(module)
    read_bytes = 4 * numel(shape)
    record: dict[str, Any] = {
        "shape": list(shape),
        "bytes_moved": case.nbytes,
        "nominal_floor_ms": nominal_floor_ms(case.nbytes),
        "floor_ms": case.floor_ms,
        "floor": "the fastest read of x alone: read_only kernels or torch's x.sum()",
        "copy_gbps": case.copy_gbps,
        "copy_based_floor_ms": read_bytes / (case.copy_gbps * 1e9) * 1e3,
    }
    print(
        f"\ncolumn sum {shape}: {case.nbytes / 1e9:.2f} GB moved; read floor {case.floor_ms:.3f} ms, "
        f"copy-based {record['copy_based_floor_ms']:.3f} ms",
        flush=True,
    )
    _print_header()
    for row in floor_rows:
        _print_row(row)
    rows = case.torch_rows(compile_too=not args.skip_compile)
    for row in rows:
        _print_row(row)
    record["eager_ms"] = _torch_ms(rows, "torch_eager", "sum(dim=1)")
    record["compile_ms"] = _torch_ms(rows, "torch_compile", "sum(dim=1)")
    for config in column_configs():
        rows.append(case.kernel_row(module, config))
        _print_row(rows[-1])
    record["rows"] = floor_rows + rows
    del case
    torch.cuda.empty_cache()
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--commit")
    parser.add_argument("--quick", action="store_true", help="small shapes, odd sizes (tails)")
    parser.add_argument("--only", choices=("elementwise", "column"))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--skip-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument(
        "--dump-source", type=Path, metavar="PATH", help="write the CUDA source to PATH, the C++ side beside it, exit"
    )
    args = parser.parse_args(argv)

    if args.dump_source is not None:
        wrapper = args.dump_source.with_suffix(".cpp")
        args.dump_source.parent.mkdir(parents=True, exist_ok=True)
        args.dump_source.write_text(kernel_source(), encoding="utf-8")
        wrapper.write_text(TORCH_WRAPPER, encoding="utf-8")
        print(f"stream_probe: wrote {args.dump_source} (kernels, for nvcc) and {wrapper} (the C++ side)")
        return 0
    if not torch.cuda.is_available():
        print("stream_probe: needs a CUDA GPU (none visible to torch)", file=sys.stderr)
        return 2
    if args.iters < 1 or args.warmup < 0:
        print("stream_probe: --iters must be positive, --warmup not negative", file=sys.stderr)
        return 2
    from result_file import head_commit, write_result

    module, build_s = build()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()} ({sms} SMs): extension built in {build_s:.1f} s", flush=True)
    results: dict[str, list[dict[str, Any]]] = {"elementwise": [], "column": []}
    started = time.perf_counter()
    for kind, shapes in case_shapes(args.quick, args.only).items():
        for shape in shapes:
            torch.cuda.reset_peak_memory_stats()
            if kind == "elementwise":
                record = run_elementwise(module, shape, args)
            else:
                record = run_column(module, (shape[0], shape[1], shape[2]), args)
            record["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
            results[kind].append(record)
            best = best_kernel(record["rows"])
            if best is not None:
                print(
                    f"best kernel: {best['variant']} {best['config']}: {best['ms']:.3f} ms, "
                    f"{best['fraction_of_floor']:.2f} of the floor; eager {record['eager_ms'] or math.nan:.3f} ms, "
                    f"compile {record['compile_ms'] or math.nan:.3f} ms; peak {record['peak_memory_gb']:.1f} GB",
                    flush=True,
                )
            if args.out is not None:
                write_result(
                    args.out,
                    "stream_probe",
                    head_commit(args.commit),
                    torch=torch.__version__,
                    sm_count=sms,
                    settings={"warmup": args.warmup, "iters": args.iters, "flush_bytes": FLUSH_BYTES},
                    build_s=build_s,
                    run_s=time.perf_counter() - started,
                    **results,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
