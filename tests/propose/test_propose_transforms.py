"""The safe source transformations, on the starter suite and on our own kernels."""

from __future__ import annotations

from propose_helpers import DATA, TASKS

from optiml.propose.transforms import (
    add_const,
    add_launch_bounds,
    add_restrict,
    retune_literal_launches,
    source_rewrites,
    unroll_fixed_loops,
    unroll_runtime_loops,
)

RELU = (DATA / "relu_literal.cu").read_text()
MATMUL = (DATA / "matmul_tiled.cu").read_text()
SOFTMAX = (DATA / "softmax_block.cu").read_text()
INPLACE = (DATA / "scale_inplace.cu").read_text()


def changed_lines(old: str, new: str) -> list[str]:
    old_lines = set(old.splitlines())
    return [line for line in new.splitlines() if line not in old_lines]


def test_restrict_on_every_pointer_without_it() -> None:
    [rewrite] = add_restrict(RELU)
    assert rewrite.key == "restrict:relu_kernel" and rewrite.category == "qualifiers"
    assert changed_lines(RELU, rewrite.code) == [
        "__global__ void relu_kernel(float* __restrict__ x, float* __restrict__ y, int64_t n) {"
    ]


def test_restrict_refused_where_a_launch_aliases_pointers() -> None:
    # scale_kernel is launched as scale_kernel(y, y, ...): only copy_kernel may get __restrict__
    assert [r.key for r in add_restrict(INPLACE)] == ["restrict:copy_kernel"]


def test_restrict_not_repeated_on_the_starter_suite() -> None:
    assert add_restrict((TASKS / "silu.naive.cu").read_text()) == []


def test_const_only_on_pointers_that_are_only_read() -> None:
    [rewrite] = add_const(RELU)
    assert changed_lines(RELU, rewrite.code) == ["__global__ void relu_kernel(const float* x, float* y, int64_t n) {"]
    code = """__global__ void k(float* a, float* b, float* c, float* d, float* e, int n) {
  a[0] += 1.0f;
  float* alias = b;
  c[1]++;
  atomicAdd(&d[0], 1.0f);
  e[2] = a[0] + alias[0];
}
void run(float* p, float* q, float* r, float* s, float* t) { k<<<1, 32>>>(p, q, r, s, t, 1); }
"""
    assert add_const(code) == []  # each pointer is written, copied, or has its address taken


def test_launch_bounds_use_the_knob_name() -> None:
    silu = (TASKS / "silu.naive.cu").read_text()
    plain, with_min = add_launch_bounds(silu)
    assert "__global__ void __launch_bounds__(BLOCK_SIZE) silu_kernel(" in plain.code
    assert "__launch_bounds__(BLOCK_SIZE, 1024 / (BLOCK_SIZE)) silu_kernel(" in with_min.code
    assert "4 resident blocks of 256 threads" in with_min.rationale and "64 per thread" in with_min.rationale


def test_launch_bounds_of_a_dim3_block_and_a_literal() -> None:
    [plain, _] = add_launch_bounds(MATMUL)
    assert "__launch_bounds__(TILE * TILE) matmul_tiled(" in plain.code
    relu = [r.code for r in add_launch_bounds(RELU)]
    assert any("__launch_bounds__(256) relu_kernel(" in c for c in relu)
    assert any("__launch_bounds__(256, 4) relu_kernel(" in c for c in relu)


def test_no_launch_bounds_without_a_compile_time_block_size() -> None:
    # `const int threads = 128;` lives in the host function: the kernel's attribute cannot name it
    assert add_launch_bounds(INPLACE) == []


def test_pragma_unroll_on_fixed_trip_loops() -> None:
    keys = {r.key: r for r in unroll_fixed_loops(SOFTMAX)}
    assert set(keys) == {"unroll:block_reduce_max", "unroll:block_reduce_sum", "unroll:softmax_rows"}
    rows = keys["unroll:softmax_rows"].code
    assert "    #pragma unroll\n    for (int j = 0; j < ITEMS_PER_THREAD; ++j) {" in rows
    assert "  #pragma unroll\n  for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {" in keys["unroll:block_reduce_max"].code
    # applying it twice changes nothing more
    assert all(r.key != "unroll:softmax_rows" for r in unroll_fixed_loops(rows))


def test_partial_unroll_on_innermost_runtime_loops() -> None:
    [rewrite] = unroll_runtime_loops(SOFTMAX)
    assert rewrite.key == "unroll_runtime:softmax_rows"
    # the two col loops get it; the outer base loop (it contains a loop) does not
    assert changed_lines(SOFTMAX, rewrite.code) == ["  #pragma unroll 4"] * 2
    assert "  #pragma unroll 4\n  for (int64_t col = threadIdx.x; col < n; col += BLOCK_SIZE) s +=" in rewrite.code
    assert "  #pragma unroll 4\n  for (int64_t col = threadIdx.x; col < n; col += BLOCK_SIZE) yr[" in rewrite.code


def test_literal_launch_retuned_with_its_grid() -> None:
    rewrites = {r.key: r.code for r in retune_literal_launches(RELU)}
    assert set(rewrites) == {"launch:relu_kernel=128", "launch:relu_kernel=512"}
    assert "relu_kernel<<<(n + 127) / 128, 128, 0, stream>>>" in rewrites["launch:relu_kernel=128"]
    assert "relu_kernel<<<(n + 511) / 512, 512, 0, stream>>>" in rewrites["launch:relu_kernel=512"]


def test_literal_launch_left_alone_when_device_code_uses_the_number() -> None:
    code = """__global__ void k(float* y) { __shared__ float s[256]; s[threadIdx.x] = 0.f; y[0] = s[0]; }
void run(float* y, int n) { k<<<(n + 255) / 256, 256>>>(y); }
"""
    assert retune_literal_launches(code) == []


def test_source_rewrites_respect_limits_and_are_stable() -> None:
    # a literal retune to 512 would exceed __launch_bounds__(256): not offered
    bounded = next(r.code for r in add_launch_bounds(RELU) if "__launch_bounds__(256)" in r.code)
    keys = [r.key for r in source_rewrites(bounded)]
    assert "launch:relu_kernel=128" in keys and "launch:relu_kernel=512" not in keys
    assert [r.key for r in source_rewrites(RELU)] == [r.key for r in source_rewrites(RELU)]
