"""Screening rules: every source rule fires on a positive snippet and stays quiet on a near miss."""

from __future__ import annotations

import pytest

from optiml.integrity.rules import FLAG, POLICY, REJECT, RULES
from optiml.integrity.screen import ScreenReport, is_fp32_strict, screen_kernel, screen_source
from optiml.kernel.source import KernelSource
from optiml.task import TaskMeta

# rule id -> (snippet that must trigger it on its last line, near miss that must not trigger it)
CASES: dict[str, tuple[str, str]] = {
    "process-spawn": (
        'void f() {\n  std::system("nvidia-smi");',
        '// we never fork() or system() here\nconst char* s = "popen(fork)"; obj.system(1); t = x.clone();',
    ),
    "process-exit": (
        "int g(int n) {\n  if (n < 0) exit(1);",
        "int exit_code = 0; __device__ void abort_if(bool c) {}\nvoid h() { abort_if(false); return; }",
    ),
    "signals": (
        "void f() {\n  signal(SIGSEGV, handler);",
        "float raise_to(float x) { return x; }\nfloat y = raise_to(2.0f);",
    ),
    "syscall": (
        "void f(void* p) {\n  mprotect(p, 4096, 7);",
        "size_t mmap_bytes = 0;\nint syscall_count = 1;",
    ),
    "network": (
        "int f() {\n  int fd = socket(AF_INET, SOCK_STREAM, 0);",
        "auto g = std::bind(f, 1);\nint sockets = 0; obj.connect(1);",
    ),
    "file-io": (
        'void f() {\n  FILE* out = fopen("log.txt", "w");',
        "struct R { int read(int x) { return x; } };\nvoid g(R r) { r.read(1); vec.write(2); "
        "auto write = [&](int i) { o[i] = 0; }; write(3); }",
    ),
    "environment": (
        'const char* f() {\n  return getenv("OPENAI_API_KEY");',
        'int env = 3;\nconst char* s = "getenv";',
    ),
    "dynamic-loading": (
        'void* f() {\n  return dlopen("libcuda.so.1", 2);',
        "int dl = 0;\n// dlsym would be cheating",
    ),
    "threads": (
        "void f() {\n  std::thread worker(run); worker.detach();",
        "int i = threadIdx.x;\n__syncthreads();",
    ),
    "streams": (
        "cudaStream_t s;\ncudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);",
        "int f(cudaStream_t stream) {\n  cudaStreamSynchronize(stream); return 0; }",
    ),
    "timer": (
        "cudaEvent_t e;\ncudaEventRecord(e, stream);",
        "// cudaEventRecord(start)\nint events = 2;",
    ),
    "l2-persistence": (
        "cudaStreamAttrValue a;\na.accessPolicyWindow.base_ptr = p;",
        'const char* doc = "accessPolicyWindow";\nint window = 4;',
    ),
    "device-control": (
        "void f() {\n  cudaDeviceReset();",
        "void f() {\n  cudaDeviceSynchronize();",
    ),
    "api-definition": (
        '// a timer that always says zero\nextern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a) {}',
        "__device__ float my_cuda_helper(float x) { return x; }\nint f() { return (int)cudaGetLastError(); }",
    ),
    "load-time-code": (
        "static void hook()\n__attribute__((constructor));",
        "struct Foo { Foo() {} ~Foo() {} };\nint constructor_calls = 0;",
    ),
    "include-path": (
        '#include <cstdio>\n#include "/home/user/.netrc"',
        '#include "optiml.h"\n#include <cuda/std/cmath>',
    ),
    "inline-asm": (
        'void f() {\n  asm volatile("syscall");',
        'unsigned lane;\nasm("mov.u32 %0, %%laneid;" : "=r"(lane));',
    ),
    "precision": (
        "__global__ void k(float* y) {\n  __half h = __float2half(y[0]);",
        "int half = n / 2;\nfloat x = 0.5f * half;",
    ),
    "tf32": (
        '__device__ unsigned f(float x) {\n  unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));',
        "float tf = 0.5f;\nfloat32_t x;",
    ),
    "launch-default-stream": (
        "void f() {\n  k<<<grid, block>>>(x, y, n);",
        "void f(cudaStream_t stream) {\n  k<<<grid, block, 0, stream>>>(x, y, n);",
    ),
    "persistent-state": (
        "int f() {\n  static float* cache = nullptr;",
        "__global__ void k() { static __shared__ float s[32]; }\n__constant__ float c[4]; static const int N = 4;",
    ),
    "device-alloc": (
        "void f() {\n  cudaMalloc(&buffer, bytes);",
        "void f(void* workspace) {\n  float* buffer = (float*)workspace;",
    ),
    "device-state": (
        "void f() {\n  cudaDeviceSetLimit(cudaLimitStackSize, 1 << 16);",
        "void f() {\n  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 16);",
    ),
    "clock": (
        "__global__ void k() {\n  long long t = clock64();",
        "float clock_rate = 1.0f;\nint t = s.time();",
    ),
    "console-output": (
        '__global__ void k() {\n  printf("%d\\n", threadIdx.x);',
        'char buf[16];\nsnprintf(buf, 16, "%d", 3);',
    ),
    "token-pasting": (
        "#define KERNEL(n) k_\\\n##n",
        "#define NAME(x) #x\nconst char* s = NAME(k);",
    ),
    "path-literal": (
        'void f() {\n  const char* p = "/proc/self/environ";',
        'printf("%d/%d", a, b);\nconst char* unit = "GB/s";',
    ),
}


def _source_rules() -> list[str]:
    return [rule.id for rule in POLICY if rule.applies_to == "source"]


def test_every_source_rule_has_a_case() -> None:
    assert sorted(CASES) == sorted(_source_rules())


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_its_line(rule_id: str) -> None:
    positive, _ = CASES[rule_id]
    report = screen_source(positive, fp32_strict=True)
    hits = [f for f in report.findings if f.rule == rule_id]
    assert hits, f"{rule_id} did not fire on:\n{positive}\n{report.findings}"
    line = positive.count("\n") + 1
    assert any(f.line == line for f in hits), [(f.line, f.text) for f in hits]
    assert all(f.action == RULES[rule_id].action for f in hits)
    assert hits[0].text == positive.splitlines()[hits[0].line - 1].strip()


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_ignores_near_miss(rule_id: str) -> None:
    _, negative = CASES[rule_id]
    report = screen_source(negative, fp32_strict=True)
    assert [f for f in report.findings if f.rule == rule_id] == []


def test_precision_only_applies_to_fp32_strict_tasks() -> None:
    code = (
        "#include <cuda_fp16.h>\n"
        "__device__ void f(float x) { __half h = __float2half(x);\n"
        'asm("cvt.rn.f16.f32 %0, %1;"); }'
    )
    strict = screen_source(code, fp32_strict=True)
    assert strict.rejected and {f.line for f in strict.findings if f.rule == "precision"} == {2, 3}
    assert not screen_source(code, fp32_strict=False).findings


def test_tf32_forms_are_flagged_and_cublas_tf32_modes_rejected() -> None:
    """TF32 arithmetic in the kernel may be a 3xTF32 split (fp32 accuracy): flagged, and verification
    decides; cuBLAS's TF32 math mode is plain TF32: rejected."""
    wmma = "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32> a;"
    asm = 'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(o) : "f"(x));'
    mma = (
        'asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, '
        '{%0,%1,%2,%3};");'
    )
    for statement in (wmma, asm, mma, "float t = __float_to_tf32(x);"):
        code = "__device__ void f() {\n" + statement + "\n}"
        report = screen_source(code, fp32_strict=True)
        assert [(f.rule, f.action) for f in report.findings] == [("tf32", "flag")], code
        assert not report.rejected and not screen_source(code, fp32_strict=False).findings
    cublas = "void f() {\ncublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);\n}"
    assert [f.rule for f in screen_source(cublas, fp32_strict=True).rejections] == ["precision"]


def test_comments_and_strings_never_trigger() -> None:
    code = """/* fork(); system("rm -rf /"); dlopen(0, 0); */
// std::thread t(f); cudaStreamCreate(&s); getenv("HOME");
const char* help = "call exit(1) or abort() or socket() if you dare";
"""
    assert screen_source(code, fp32_strict=True).findings == ()


def test_macro_bodies_are_screened() -> None:
    code = '#define RUN(cmd) \\\n  system(cmd)\nvoid f() { RUN("ls"); }'
    report = screen_source(code, fp32_strict=True)
    assert report.rejected and report.rejections[0].rule == "process-spawn"
    assert report.rejections[0].line == 2


def test_message_names_first_rejection_and_counts_the_rest() -> None:
    code = "void f() {\n  fork();\n  dlopen(0, 0);\n  std::thread t(g);\n}"
    report = screen_source(code, fp32_strict=False)
    assert report.rejected
    message = report.message()
    assert "\n" not in message
    assert message.startswith("rejected by screening: [process-spawn] line 2: `fork();`")
    assert message.endswith("(+2 more)")


def test_flags_do_not_reject_and_become_warnings() -> None:
    code = "int f() {\n  static int calls = 0;\n  k<<<1, 32>>>();\n  return calls++;\n}"
    report = screen_source(code, fp32_strict=True)
    assert not report.rejected
    assert [f.rule for f in report.flags] == ["persistent-state", "launch-default-stream"]
    assert report.message() == (
        "passed screening with 2 flag(s): persistent-state (line 2), launch-default-stream (line 3)"
    )
    warnings = report.warnings()
    assert len(warnings) == 2 and warnings[0].startswith("screening flag [persistent-state] line 2:")


def test_clean_kernel_passes() -> None:
    code = """#include "optiml.h"
__global__ void axpy(const float* __restrict__ x, const float* __restrict__ y, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.5f * x[i] + y[i];
}
extern "C" int optiml_forward(const optiml_tensor* in, int n_in, optiml_tensor* out, int n_out,
                              void* ws, size_t ws_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&in[0]);
  axpy<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((const float*)in[0].data,
      (const float*)in[1].data, (float*)out[0].data, n);
  return optiml_check_launch();
}
"""
    report = screen_source(code, fp32_strict=True)
    assert report.findings == ()
    assert report.message() == "passed screening"


def test_one_finding_per_rule_and_line() -> None:
    report = screen_source("void f() { fork(); fork(); vfork(); }", fp32_strict=False)
    assert len(report.findings) == 1


def test_long_lines_are_shortened() -> None:
    code = "void f() { fork(); " + "int x = 0; " * 40 + "}"
    (finding,) = screen_source(code, fp32_strict=False).findings
    assert len(finding.text) == 120 and finding.text.endswith("…")


def test_screen_kernel_includes_flags() -> None:
    kernel = KernelSource("__global__ void k() {}", flags=("-O3", "-include", "/etc/passwd"))
    report = screen_kernel(kernel, fp32_strict=False)
    assert report.rejected
    assert report.rejections[0].rule == "nvcc-flag" and report.rejections[0].line is None
    assert "nvcc flags" in report.message()


def test_reports_add_up() -> None:
    a = screen_source("void f() { fork(); }", fp32_strict=False)
    b = ScreenReport()
    assert (a + b).findings == a.findings


@pytest.mark.parametrize(
    ("meta", "strict"),
    [
        (TaskMeta(), True),
        (TaskMeta(atol=1e-2, rtol=1e-2), False),
        (TaskMeta(dtype="float16", atol=1e-2, rtol=1e-2), False),
        (TaskMeta(dtype="float16", atol=1e-5, rtol=1e-5), False),
        (TaskMeta(atol=1e-4, rtol=5e-3), False),
        (TaskMeta(precision="tf32", atol=1e-2, rtol=1e-2), False),
        (TaskMeta(precision="tf32", atol=1e-4, rtol=1e-4), False),  # TF32 chosen: a tight tolerance is the user's
    ],
)
def test_fp32_strict_definition(meta: TaskMeta, strict: bool) -> None:
    assert is_fp32_strict(meta) is strict


def test_actions_are_reject_or_flag() -> None:
    assert {rule.action for rule in POLICY} == {REJECT, FLAG}
