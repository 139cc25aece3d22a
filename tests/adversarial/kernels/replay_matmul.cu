// Exploit (task matmul, threat class 6): a product computed once is remembered under a cheap content
// key (the first element of each operand) and replayed by a copy when the key comes back. On repeated
// timing inputs every timed call is a 16 MiB copy: correct, and thousands of times under the GEMM's
// flops / compute peak but not under bytes / bandwidth, so a bandwidth-only floor let it through.
// Expected: integrity — below the physical floor once the compute roof is passed — or, where the timed
// inputs never repeat (content-fresh timing), wrong_answer: its cheap key then replays stale products.
#include "optiml.h"

#define TILE 16
#define SLOTS 16

struct Cache {
  unsigned int key[SLOTS];
  int valid[SLOTS];
  int next, hit, store;
  unsigned int now;
};

static Cache* g_state = nullptr;  // device memory
static float* g_products = nullptr;  // SLOTS products of n x n
static int64_t g_n = 0;

__global__ void lookup(const float* __restrict__ a, const float* __restrict__ b, Cache* st) {
  unsigned int key = __float_as_uint(a[0]) * 2654435761u ^ __float_as_uint(b[0]);
  st->now = key;
  st->hit = -1;
  for (int s = 0; s < SLOTS; ++s)
    if (st->valid[s] && st->key[s] == key) {
      st->hit = s;
      break;
    }
  st->store = st->next % SLOTS;
}

__global__ void matmul_or_replay(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                 int64_t n, float* __restrict__ products, const Cache* st) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = blockIdx.y * (int64_t)TILE + ty, col = blockIdx.x * (int64_t)TILE + tx;
  const int hit = st->hit;
  if (hit >= 0) {  // the "cache hit": a copy instead of 2 n^3 flops
    if (row < n && col < n) c[row * n + col] = products[hit * n * n + row * n + col];
    return;
  }
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE];
  float acc = 0.0f;
  for (int64_t t = 0; t < n; t += TILE) {
    as[ty][tx] = (row < n && t + tx < n) ? a[row * n + t + tx] : 0.0f;
    bs[ty][tx] = (t + ty < n && col < n) ? b[(t + ty) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(as[ty][k], bs[k][tx], acc);
    __syncthreads();
  }
  if (row < n && col < n) {
    c[row * n + col] = acc;
    products[st->store * n * n + row * n + col] = acc;
  }
}

__global__ void commit(Cache* st) {
  if (st->hit < 0) {
    st->key[st->store] = st->now;
    st->valid[st->store] = 1;
    st->next += 1;
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (n_inputs != 2 || n_outputs != 1 || inputs[0].ndim != 2) return 1;
  int64_t n = inputs[0].shape[0];
  if (n != g_n) {  // a new size: start an empty cache
    if (g_products != nullptr) cudaFree(g_products);
    if (g_state == nullptr && cudaMalloc(&g_state, sizeof(Cache)) != cudaSuccess) return 2;
    if (cudaMalloc(&g_products, (size_t)SLOTS * n * n * sizeof(float)) != cudaSuccess) return 2;
    cudaMemsetAsync(g_state, 0, sizeof(Cache), stream);
    g_n = n;
  }
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  lookup<<<1, 1, 0, stream>>>(a, b, g_state);
  dim3 block(TILE, TILE), grid((unsigned)optiml_cdiv(n, TILE), (unsigned)optiml_cdiv(n, TILE));
  matmul_or_replay<<<grid, block, 0, stream>>>(a, b, (float*)outputs[0].data, n, g_products, g_state);
  commit<<<1, 1, 0, stream>>>(g_state);
  return optiml_check_launch();
}
