// conv2d.naive.cu — naive OptiML baseline for tasks/conv2d.py: direct 2-D convolution (NCHW,
// stride 1, no dilation, one group, zero padding) with bias:
//   y[n, co, oh, ow] = bias[co] + sum_{ci, i, j} x[n, ci, oh - pad_h + i, ow - pad_w + j] * w[co, ci, i, j]
// Inputs (ABI order): x [N, Cin, H, W], then the parameters in state_dict order:
// weight [Cout, Cin, KH, KW], bias [Cout]. The padding is not passed by the ABI; with stride 1 it
// follows from the shapes: Ho = H + 2*pad_h - KH + 1.
//
// One thread per output element (flat index, ow fastest, so a warp reads neighbouring input
// pixels) loops over all Cin*KH*KW taps straight from global memory, skipping taps that fall in
// the zero padding. Naive because every input pixel is re-read by up to Cout*KH*KW threads and
// every weight by all threads of a channel, with reuse left to L1/L2, so the kernel is load bound
// far below the fp32 FMA peak. A fast version is an implicit GEMM (M = N*Ho*Wo, N = Cout,
// K = Cin*KH*KW): shared-memory tiles of input patches and weights, register micro-tiles of
// several output channels x pixels per thread, and vectorised, double-buffered loads.
#include "optiml.h"

#define BLOCK_SIZE 256  // threads (output elements) per block

static const int64_t kMaxGridX = 2147483647;  // hardware limit on gridDim.x (not a tuning knob)

// True when t is densely packed in row-major order (dims of size 1 may have any stride).
static bool is_contiguous(const optiml_tensor* t) {
  if (optiml_numel(t) == 0) return true;  // an empty tensor has no layout to respect
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->stride[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

// Each thread computes one output element per grid-stride step (so any size works).
__global__ void conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ bias, float* __restrict__ y, int64_t batch,
                              int64_t cin, int64_t h, int64_t wd, int64_t cout, int64_t kh,
                              int64_t kw, int64_t ho, int64_t wo, int64_t pad_h, int64_t pad_w) {
  const int64_t total = batch * cout * ho * wo;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t ow = o % wo;
    int64_t t = o / wo;
    const int64_t oh = t % ho;
    t /= ho;
    const int64_t co = t % cout;
    const int64_t nb = t / cout;
    float acc = 0.0f;
    for (int64_t ci = 0; ci < cin; ++ci) {
      const float* xc = x + (nb * cin + ci) * h * wd;
      const float* wc = w + (co * cin + ci) * kh * kw;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t ih = oh - pad_h + i;
        if (ih < 0 || ih >= h) continue;
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t iw = ow - pad_w + j;
          if (iw < 0 || iw >= wd) continue;
          acc += xc[ih * wd + iw] * wc[i * kw + j];
        }
      }
    }
    y[o] = acc + bias[co];
  }
}

// Returns -1 for wrong argument counts, -2 for wrong dtypes, -3 for unexpected shapes/layouts.
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != 3 || n_outputs != 1) return -1;
  const optiml_tensor* x = &inputs[0];
  const optiml_tensor* w = &inputs[1];
  const optiml_tensor* b = &inputs[2];
  const optiml_tensor* y = &outputs[0];
  if (x->dtype != OPTIML_FLOAT32 || w->dtype != OPTIML_FLOAT32 || b->dtype != OPTIML_FLOAT32 ||
      y->dtype != OPTIML_FLOAT32)
    return -2;
  if (x->ndim != 4 || w->ndim != 4 || b->ndim != 1 || y->ndim != 4) return -3;
  const int64_t batch = x->shape[0], cin = x->shape[1], h = x->shape[2], wd = x->shape[3];
  const int64_t cout = w->shape[0], kh = w->shape[2], kw = w->shape[3];
  const int64_t ho = y->shape[2], wo = y->shape[3];
  if (w->shape[1] != cin || b->shape[0] != cout || y->shape[0] != batch || y->shape[1] != cout)
    return -3;
  // Stride 1: Ho = H + 2*pad_h - KH + 1, so 2*pad_h = Ho - H + KH - 1 must be even and >= 0.
  const int64_t pad_h2 = ho - h + kh - 1;
  const int64_t pad_w2 = wo - wd + kw - 1;
  if (pad_h2 < 0 || pad_w2 < 0 || pad_h2 % 2 != 0 || pad_w2 % 2 != 0) return -3;
  if (!is_contiguous(x) || !is_contiguous(w) || !is_contiguous(b) || !is_contiguous(y)) return -3;

  const int64_t total = optiml_numel(y);
  if (total == 0) return 0;
  const int64_t blocks = optiml_cdiv(total, BLOCK_SIZE);
  const unsigned grid = (unsigned)(blocks < kMaxGridX ? blocks : kMaxGridX);
  conv2d_kernel<<<grid, BLOCK_SIZE, 0, stream>>>((const float*)x->data, (const float*)w->data,
                                                 (const float*)b->data, (float*)y->data, batch, cin,
                                                 h, wd, cout, kh, kw, ho, wo, pad_h2 / 2, pad_w2 / 2);
  return optiml_check_launch();
}
