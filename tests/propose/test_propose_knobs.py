"""Finding knobs, setting them, proposing values, and the hardware-limit check."""

from __future__ import annotations

import pytest
from propose_helpers import DATA, TASKS

from optiml.propose.errors import EditApplyError
from optiml.propose.knobs import Knob, candidate_values, check_limits, find_knobs, role_of, set_knob
from optiml.propose.syntax import const_eval, device_functions, launches, mask


def knobs_of(path_text: str) -> dict[str, tuple[int, str, str]]:
    return {k.name: (k.value, k.role, k.form) for k in find_knobs(path_text)}


def test_starter_suite_knobs() -> None:
    assert knobs_of((TASKS / "cross_entropy.naive.cu").read_text()) == {
        "BLOCK_SIZE": (128, "block_size", "define"),
        "REDUCE_BLOCK_SIZE": (256, "block_size", "define"),
    }
    # BLOCK_X / BLOCK_Y are block dimensions; kMaxGridX / kMaxGridY are limits, not knobs
    assert knobs_of((TASKS / "transpose.naive.cu").read_text()) == {
        "BLOCK_X": (32, "block_dim", "define"),
        "BLOCK_Y": (8, "block_dim", "define"),
    }


def test_constexpr_and_local_launch_constants() -> None:
    assert knobs_of((DATA / "matmul_tiled.cu").read_text()) == {"TILE": (16, "tile", "constexpr")}
    assert knobs_of((DATA / "scale_inplace.cu").read_text()) == {"threads": (128, "block_size", "local")}


def test_non_knobs_and_ambiguous_names_are_skipped() -> None:
    code = """
#define N 4096
#define UNROLL 4
static const float EPS = 1e-5f;
constexpr int kBlockSize = 128;
void a() { const int threads = 256; }
void b() { const int threads = 512; }
void c() { int block = 64; block *= 2; }
"""
    assert knobs_of(code) == {"UNROLL": (4, "unroll", "define"), "kBlockSize": (128, "block_size", "constexpr")}


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("BLOCK_SIZE", "block_size"),
        ("REDUCE_BLOCK_SIZE", "block_size"),
        ("THREADS_PER_BLOCK", "block_size"),
        ("kNumThreads", "block_size"),
        ("BLOCK_X", "block_dim"),
        ("BLOCK_ROWS", "block_dim"),
        ("TILE_DIM", "tile"),
        ("BLOCK_K", "tile"),
        ("BM", "tile"),
        ("VEC_SIZE", "vector_width"),
        ("ITEMS_PER_THREAD", "items_per_thread"),
        ("NUM_WARPS", "warps"),
        ("UNROLL_FACTOR", "unroll"),
        ("N", None),
        ("kMaxGridX", None),
        ("LN_EPS", None),
        ("IGNORE_INDEX", None),
    ],
)
def test_role_of(name: str, role: str | None) -> None:
    assert role_of(name) == role


def test_set_knob_rewrites_only_the_value() -> None:
    code = "#define BLOCK_SIZE (256u)  // threads\nconstexpr int TILE = 16;\n"
    assert set_knob(code, "BLOCK_SIZE", 512) == "#define BLOCK_SIZE (512u)  // threads\nconstexpr int TILE = 16;\n"
    assert set_knob(code, "TILE", 32).endswith("constexpr int TILE = 32;\n")
    with pytest.raises(
        EditApplyError, match=r"knob WARPS is not defined in this kernel \(its knobs: BLOCK_SIZE, TILE\)"
    ):
        set_knob(code, "WARPS", 4)


def test_candidate_values_walk_outward_halving_first() -> None:
    knob = Knob("BLOCK_SIZE", 256, "block_size", "define", 1)
    assert candidate_values(knob) == [128, 512, 64, 1024, 32]
    assert candidate_values(Knob("VEC", 4, "vector_width", "define", 1)) == [2, 8, 1]


def test_check_limits_block_size_and_dim3() -> None:
    transpose = (TASKS / "transpose.naive.cu").read_text()
    assert check_limits(transpose) is None
    too_big = set_knob(transpose, "BLOCK_Y", 64)
    assert check_limits(too_big) == "launch of transpose_kernel uses 2048 threads per block (limit 1024)"
    tiled = (DATA / "matmul_tiled.cu").read_text()
    assert check_limits(set_knob(tiled, "TILE", 32)) is None
    assert "4096 threads per block" in str(check_limits(set_knob(tiled, "TILE", 64)))


def test_check_limits_static_shared_memory() -> None:
    code = """#define TILE 64
__global__ void k(float* y) {
  __shared__ float a[TILE][TILE];
  __shared__ double b[TILE][TILE + 1];
  y[0] = a[0][0] + b[0][0];
}
"""
    assert check_limits(code) == "k declares 49664 bytes of static shared memory (limit 49152)"
    assert check_limits(set_knob(code, "TILE", 32)) is None


def test_check_limits_launch_bounds() -> None:
    code = """#define BLOCK 256
__global__ void __launch_bounds__(256) k(float* y) { y[threadIdx.x] = 0.f; }
void run(float* y) { k<<<1, BLOCK>>>(y); }
"""
    assert check_limits(code) is None
    assert check_limits(set_knob(code, "BLOCK", 512)) == "launch of k uses 512 threads but __launch_bounds__ allows 256"


def test_scanner_ignores_comments_and_strings() -> None:
    code = '// __global__ void fake(int x) {}\nconst char* s = "k<<<1, 2>>>(x)";\n__global__ void real(int x) {}\n'
    assert [f.name for f in device_functions(code)] == ["real"]
    assert launches(code) == []
    assert len(mask(code)) == len(code)


def test_const_eval() -> None:
    env = {"TILE": 16, "PAD": 1}
    assert const_eval("TILE * (TILE + PAD) / 2", env) == 136
    assert const_eval("0x10u << 2", env) == 64
    assert const_eval("sizeof(float) * TILE", env) is None
    assert const_eval("UNKNOWN + 1", env) is None
