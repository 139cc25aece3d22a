"""The screening policy: one :class:`Rule` per kind of thing a candidate must not (or should not) do.

A candidate is one translation unit whose only job is to launch kernels on the stream it is
given. Anything else its host code could do — start processes, open files or sockets, load
libraries, spawn threads or streams, touch the harness's timer or the L2 carve-out, define
symbols that shadow the CUDA runtime — is either refused before compiling (``reject``) or
recorded as a warning shown with the result (``flag``). Rules marked *fp32-strict* apply
only to float32 tasks with a tight tolerance, where half precision or TF32 is a downgrade.

This table is the single source of truth: :func:`policy_markdown` renders it for
``docs/integrity.md`` (a test keeps the two identical), and :mod:`optiml.integrity.screen`
runs it. Static screening is the first of two lines: whatever it misses, the isolated
worker (scrubbed environment, own directory, no network, resource limits) still contains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

REJECT = "reject"
FLAG = "flag"


@dataclass(frozen=True)
class Rule:
    """One row of the policy: what it matches, what happens, and why (shown to users and proposers).

    Matchers (all optional, combined with "or"):

    * ``names`` — any reference to these names, unqualified, ``::``- or ``std::``-qualified,
      not a member access (``x.name``);
    * ``calls`` — unqualified or ``::``-qualified calls (``name(``), where the source does not
      define a function of that name itself: for common words such as ``write`` or ``exit``
      (``std::`` forms that mean the same go in ``qualified``; ``std::bind`` is not ``bind``);
    * ``prefixes`` — unqualified names starting with one of these (``cudaEvent…``);
    * ``anywhere`` — these names in any position, member accesses included;
    * ``qualified`` — regular expressions matched against the end of a ``::``-qualified name;
    * ``headers`` — a regular expression matched against every ``#include`` target;
    * ``asm`` — a regular expression searched in every inline ``asm`` template.

    Rules with ``custom=True`` are (also) matched by a dedicated detector in
    :mod:`optiml.integrity.screen`; rules with ``applies_to="flags"`` judge nvcc flags.
    """

    id: str
    action: str
    covers: str  # what it matches, for the policy table
    reason: str  # why, one clause: shown after the offending line
    fp32_strict_only: bool = False
    names: frozenset[str] = field(default_factory=frozenset)
    calls: frozenset[str] = field(default_factory=frozenset)
    prefixes: tuple[str, ...] = ()
    anywhere: frozenset[str] = field(default_factory=frozenset)
    qualified: tuple[str, ...] = ()
    headers: str | None = None
    asm: str | None = None
    custom: bool = False
    applies_to: str = "source"  # "source" or "flags"

    def __post_init__(self) -> None:
        if self.action not in (REJECT, FLAG):
            raise ValueError(f"rule {self.id}: action must be {REJECT!r} or {FLAG!r}")
        for pattern in (self.headers, self.asm, *self.qualified):
            if pattern is not None:
                re.compile(pattern)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


POLICY: tuple[Rule, ...] = (
    Rule(
        id="process-spawn",
        action=REJECT,
        covers="`system`, `popen`, `fork`, `vfork`, `exec*`, `posix_spawn*`, `clone`, `<spawn.h>`",
        reason="starts a process; a candidate only launches kernels",
        names=_words(
            "system popen fork vfork execl execle execlp execv execve execvp execvpe fexecve "
            "execveat posix_spawn posix_spawnp clone3"
        ),
        calls=_words("clone daemon"),
        headers=r"spawn\.h",
    ),
    Rule(
        id="process-exit",
        action=REJECT,
        covers="`exit`, `abort`, `_exit`, `_Exit`, `quick_exit`, `std::terminate`, `atexit`",
        reason="ends or hooks the harness process; return a nonzero code instead",
        names=_words("_exit _Exit quick_exit atexit at_quick_exit"),
        calls=_words("exit abort terminate"),
        qualified=(r"std::(exit|abort|terminate|quick_exit|_Exit)",),
    ),
    Rule(
        id="signals",
        action=REJECT,
        covers="`signal`, `sigaction`, `raise`, `kill`, `killpg`, `pthread_kill`, `tgkill`",
        reason="sends or intercepts signals, which would hide or fake a crash",
        names=_words("sigaction killpg pthread_kill tgkill tkill sigqueue"),
        calls=_words("signal raise kill"),
        qualified=(r"std::(signal|raise)",),
    ),
    Rule(
        id="syscall",
        action=REJECT,
        covers="`syscall`, `ptrace`, `prctl`, `mmap`, `mprotect`, `ioctl`, `setrlimit`, `set*id`, "
        "`mount`, `chroot`, `unshare`, `setns`, `<sys/ptrace.h>`, `<sys/syscall.h>`, `<sys/mman.h>`",
        reason="makes a raw system call the ABI does not need",
        names=_words(
            "syscall ptrace prctl mprotect mmap munmap mremap ioctl setrlimit prlimit setuid "
            "seteuid setgid setegid setresuid setresgid chroot unshare setns personality "
            "umount umount2 pivot_root"
        ),
        calls=_words("mount"),
        headers=r"sys/(ptrace|syscall|mman|prctl|resource|mount)\.h|linux/.*",
    ),
    Rule(
        id="network",
        action=REJECT,
        covers="`socket`, `connect`, `bind`, `listen`, `accept`, `send*`/`recv*`, `getaddrinfo`, "
        "`<sys/socket.h>`, `<netinet/*>`, `<arpa/*>`, `<netdb.h>`, `<curl/*>`",
        reason="opens network connections; a candidate has no use for the network",
        names=_words(
            "socket socketpair getaddrinfo gethostbyname gethostbyname2 inet_pton inet_addr "
            "inet_aton sendto recvfrom sendmsg recvmsg accept4"
        ),
        calls=_words("connect bind listen accept send recv"),
        prefixes=("curl_",),
        headers=r"sys/socket\.h|sys/un\.h|netinet/.*|arpa/.*|netdb\.h|curl/.*|ifaddrs\.h",
    ),
    Rule(
        id="file-io",
        action=REJECT,
        covers="`fopen`, `open`, `creat`, `unlink`, `rename`, `mkdir`, `opendir`, `read`/`write` on "
        "descriptors, `std::*fstream`, `std::filesystem`, `<fstream>`, `<filesystem>`, `<fcntl.h>`, "
        "`<unistd.h>`, `<dirent.h>`",
        reason="reads or writes files; a candidate's only I/O is its tensors",
        names=_words(
            "fopen fopen64 freopen fdopen tmpfile tmpnam mkstemp mkdtemp open64 openat creat "
            "unlink unlinkat rmdir mkdir mkdirat chmod fchmod chown lchown truncate ftruncate "
            "symlink readlink opendir readdir scandir chdir fchdir realpath fstat lstat stat64 "
            "pread pwrite sendfile"
        ),
        calls=_words("open close read write rename link pipe dup dup2 lseek stat access"),
        qualified=(
            r"std::(ifstream|ofstream|fstream|filebuf|basic_ifstream|basic_ofstream|basic_fstream|rename)",
            r"filesystem::\w+",
            r"std::filesystem",
        ),
        headers=r"fstream|filesystem|fcntl\.h|unistd\.h|dirent\.h|sys/stat\.h|sys/file\.h|sys/sendfile\.h",
    ),
    Rule(
        id="environment",
        action=REJECT,
        covers="`getenv`, `secure_getenv`, `setenv`, `putenv`, `unsetenv`, `environ`",
        reason="reads or changes environment variables, where secrets live",
        names=_words("getenv secure_getenv setenv putenv unsetenv clearenv environ __environ"),
    ),
    Rule(
        id="dynamic-loading",
        action=REJECT,
        covers="`dlopen`, `dlsym`, `dlmopen`, `cuGetProcAddress`, `cudaGetDriverEntryPoint*`, `<dlfcn.h>`",
        reason="loads code or looks up symbols at run time, bypassing what screening saw",
        names=_words(
            "dlopen dlmopen dlsym dlvsym dlinfo dladdr dladdr1 cuGetProcAddress cuGetProcAddress_v2 "
            "cudaGetDriverEntryPoint cudaGetDriverEntryPointByVersion LoadLibrary LoadLibraryA"
        ),
        headers=r"dlfcn\.h",
    ),
    Rule(
        id="threads",
        action=REJECT,
        covers="`std::thread`, `std::jthread`, `std::async`, `pthread_create`, `thrd_create`, "
        "`cudaLaunchHostFunc`, `cudaStreamAddCallback`, `<thread>`, `<future>`, `<pthread.h>`",
        reason="defers work to another host thread, where the timer cannot see it",
        names=_words(
            "pthread_create thrd_create cudaLaunchHostFunc cudaStreamAddCallback cuLaunchHostFunc cuStreamAddCallback"
        ),
        qualified=(r"std::(thread|jthread|async)",),
        headers=r"thread|future|pthread\.h|threads\.h",
    ),
    Rule(
        id="streams",
        action=REJECT,
        covers="`cudaStreamCreate*`, `cuStreamCreate*`, `cudaStreamPerThread`, `cudaStreamLegacy`, `cudaSetDevice`",
        reason="moves work off the stream the harness gave (or to another device)",
        names=_words(
            "cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority cuStreamCreate "
            "cuStreamCreateWithPriority cudaStreamPerThread cudaStreamLegacy cudaSetDevice "
            "cudaSetDeviceFlags cudaSetValidDevices cuCtxSetCurrent cuCtxPushCurrent"
        ),
    ),
    Rule(
        id="timer",
        action=REJECT,
        covers="`cudaEvent*`, `cuEvent*`, `cudaStreamWaitEvent`, `cudaProfilerStart/Stop`, `cuProfilerStart/Stop`",
        reason="touches events or the profiler, which are the harness's timer",
        names=_words("cudaStreamWaitEvent cuStreamWaitEvent"),
        prefixes=("cudaEvent", "cuEvent", "cudaProfiler", "cuProfiler"),
    ),
    Rule(
        id="l2-persistence",
        action=REJECT,
        covers="`cudaLimitPersistingL2CacheSize`, `accessPolicyWindow`, `cudaAccessPropertyPersisting`, "
        "`cudaCtxResetPersistingL2Cache`, `cuda::apply_access_property`, `__nv_associate_access_property`",
        reason="pins data in L2 across calls, so timed calls no longer start cold",
        anywhere=_words(
            "cudaLimitPersistingL2CacheSize accessPolicyWindow cudaAccessPolicyWindow "
            "cudaStreamAttributeAccessPolicyWindow cudaLaunchAttributeAccessPolicyWindow "
            "cudaKernelNodeAttributeAccessPolicyWindow cudaAccessPropertyPersisting "
            "cudaCtxResetPersistingL2Cache cuCtxResetPersistingL2Cache "
            "CU_LIMIT_PERSISTING_L2_CACHE_SIZE CU_ACCESS_PROPERTY_PERSISTING "
            "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW apply_access_property "
            "__nv_associate_access_property"
        ),
    ),
    Rule(
        id="device-control",
        action=REJECT,
        covers="`cudaDeviceReset`, `cuCtxCreate/Destroy`, `cuDevicePrimaryCtxReset`, `cudaIpc*`",
        reason="resets or replaces the CUDA context the harness owns",
        names=_words(
            "cudaDeviceReset cuCtxCreate cuCtxCreate_v2 cuCtxDestroy cuCtxDestroy_v2 "
            "cuDevicePrimaryCtxReset cuDevicePrimaryCtxRelease cuInit"
        ),
        prefixes=("cudaIpc", "cuIpc"),
    ),
    Rule(
        id="api-definition",
        action=REJECT,
        covers="defining a function named like a CUDA runtime/driver or C library API "
        "(`cudaEventElapsedTime`, `cuLaunchKernel`, `malloc`, `dlsym`, …)",
        reason="defines a symbol that could shadow the runtime the harness relies on",
        custom=True,
    ),
    Rule(
        id="load-time-code",
        action=REJECT,
        covers="`__attribute__((constructor))`/`destructor`, `.init_array`/`.ctors` sections",
        reason="runs code when the library is loaded or unloaded, outside any check",
        custom=True,
    ),
    Rule(
        id="include-path",
        action=REJECT,
        covers="`#include` of an absolute path, a path with `..` or `~`, a macro; `#embed`",
        reason="pulls an arbitrary file into the build (a compile-time read)",
        custom=True,
    ),
    Rule(
        id="inline-asm",
        action=REJECT,
        covers="inline `asm` with host system calls (`syscall`, `int 0x80`, `svc`), `.incbin`, "
        "`pmevent`, `brkpt`, `%pm0`…`%pm7`",
        reason="inline assembly that reaches outside the kernel's arithmetic and memory",
        asm=r"\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bsvc\s+#?0|\.incbin\b|\bpmevent\b|\bbrkpt\b|%%?pm[0-7]\b",
    ),
    Rule(
        id="precision",
        action=REJECT,
        covers="`__half`, `__nv_bfloat16`, fp8 types, `__float2half*`/`__float2bfloat16*`, half "
        "intrinsics, TF32/fast-16 cuBLAS math modes, PTX `.f16`/`.bf16`/`.e4m3`/`.e5m2` and optiml_ptx.h's "
        "half-precision MMAs (merely including `<cuda_fp16.h>` is fine)",
        reason="computes in half precision or TF32, a precision downgrade under this float32 tolerance",
        fp32_strict_only=True,
        names=_words(
            "__half __half2 __nv_bfloat16 __nv_bfloat162 nv_bfloat16 nv_bfloat162 __nv_fp8_e4m3 "
            "__nv_fp8_e5m2 __nv_fp8x2_e4m3 __nv_fp8x2_e5m2 __half2float __half22float2 "
            "__bfloat162float __hadd __hsub __hmul __hdiv __hfma __hadd2 __hsub2 "
            "__hmul2 __hfma2 __hneg __hmax __hmin __nv_cvt_float_to_fp8 "
            "CUBLAS_TF32_TENSOR_OP_MATH CUBLAS_COMPUTE_32F_FAST_16F CUBLAS_COMPUTE_32F_FAST_16BF "
            "CUBLAS_COMPUTE_32F_FAST_TF32 CUDA_R_16F CUDA_R_16BF CUDA_R_8F_E4M3 CUDA_R_8F_E5M2 "
            # optiml_ptx.h's half-precision MMAs (their PTX lies in the header, out of this source's asm)
            "optiml_mma_bf16 optiml_mma_f16 optiml_wgmma_bf16 optiml_wgmma_f16"
        ),
        prefixes=("__float2half", "__float22half", "__float2bfloat16", "__float22bfloat16"),
        asm=r"\.(f16|f16x2|bf16|bf16x2|e4m3|e5m2|e4m3x2|e5m2x2)\b",
    ),
    Rule(
        id="tf32",
        action=FLAG,
        covers="PTX `.tf32` (`cvt.rna.tf32.f32`, TF32 `mma`), `wmma::precision::tf32`, `__float_to_tf32`, "
        "optiml_ptx.h's TF32 helpers",
        reason="uses TF32 arithmetic: accepted only where it verifies under this float32 tolerance (a 3xTF32 "
        "split keeps fp32 accuracy; plain TF32, ~5e-4 relative error, fails a tolerance below 1e-3)",
        fp32_strict_only=True,
        # optiml_ptx.h's TF32 rounding and MMAs count as the PTX they wrap
        names=_words(
            "__float_to_tf32 optiml_tf32 optiml_round_tf32 optiml_split optiml_mma8 optiml_wgmma_tf32 "
            "optiml_wgmma_tf32_rs"
        ),
        qualified=(r"precision::tf32",),
        asm=r"\.tf32\b",
    ),
    Rule(
        id="launch-default-stream",
        action=FLAG,
        covers="`kernel<<<grid, block>>>` without the harness stream (or with `0`); synchronous "
        "`cudaMemcpy`/`cudaMemset` on the legacy default stream",
        reason="runs on the default stream instead of `stream`; pass `stream` (4th launch parameter, `…Async` copies)",
        calls=_words(
            "cudaMemcpy cudaMemset cudaMemcpy2D cudaMemcpy3D cudaMemset2D cudaMemset3D "
            "cudaMemcpyToSymbol cudaMemcpyFromSymbol"
        ),
        custom=True,
    ),
    Rule(
        id="persistent-state",
        action=FLAG,
        covers="mutable `static` locals and file-scope variables (host or `__device__`)",
        reason="keeps state across calls; outputs must be computed anew on every call",
        custom=True,
    ),
    Rule(
        id="device-alloc",
        action=FLAG,
        covers="`cudaMalloc*`, `cudaHostAlloc`, `cuMemAlloc*` inside the call",
        reason="allocates memory on every call (slow, and a place to cache results); export "
        "`optiml_workspace_bytes` and use the workspace",
        names=_words(
            "cudaMalloc cudaMallocAsync cudaMallocManaged cudaMallocHost cudaHostAlloc "
            "cudaMallocPitch cudaMalloc3D cudaMallocArray cudaMallocFromPoolAsync"
        ),
        prefixes=("cuMemAlloc",),
    ),
    Rule(
        id="device-state",
        action=FLAG,
        covers="`cudaDeviceSetLimit`, `cudaDeviceSetCacheConfig`, `cudaDeviceSetSharedMemConfig`, "
        "`cudaGraph*`, `cudaStreamBeginCapture`",
        reason="changes device-wide state or captures work into graphs, which outlives the call",
        names=_words(
            "cudaDeviceSetLimit cudaDeviceSetCacheConfig cudaDeviceSetSharedMemConfig "
            "cudaStreamBeginCapture cudaStreamEndCapture cudaThreadSetLimit"
        ),
        prefixes=("cudaGraph", "cuGraph"),
    ),
    Rule(
        id="clock",
        action=FLAG,
        covers="host clocks (`clock`, `time`, `clock_gettime`, `gettimeofday`, `std::chrono`, `__rdtsc`), "
        "device `clock64`, PTX `%globaltimer`/`%clock`",
        reason="behaviour that depends on time can tell a timed call from a checked one",
        names=_words("clock_gettime gettimeofday __rdtsc __rdtscp rdtsc clock64 __globaltimer"),
        calls=_words("clock time"),
        qualified=(r"std::(chrono|clock|time)", r"chrono::\w+"),
        asm=r"%%?globaltimer|%%?clock(64)?\b|\brdtscp?\b",
    ),
    Rule(
        id="console-output",
        action=FLAG,
        covers="`printf`, `fprintf`, `puts`, `std::cout`/`std::cerr`",
        reason="prints on every call: slows timing and floods the worker's log",
        names=_words("fprintf puts fputs"),
        calls=_words("printf"),
        qualified=(r"std::(cout|cerr|clog|printf)",),
    ),
    Rule(
        id="token-pasting",
        action=FLAG,
        covers="`##` in macros",
        reason="token pasting can build names that screening does not see",
        custom=True,
    ),
    Rule(
        id="path-literal",
        action=FLAG,
        covers='string literals naming system paths (`"/proc/…"`, `"/etc/…"`, `"/home/…"`, `"~/…"`, …)',
        reason="a kernel has no reason to name files",
        custom=True,
    ),
    Rule(
        id="nvcc-flag",
        action=REJECT,
        covers="nvcc flags outside the allow-list (optimisation, `-maxrregcount`, `-Xptxas` options, "
        "fast-math switches, `-lineinfo`, `-D`/`-U` with plain values, `-std=`, `--expt-*`)",
        reason="changes what is built or where it reads and writes (`-I`, `-l`, `-o`, `-include`, "
        "`-Xlinker`, `-arch`, …)",
        applies_to="flags",
    ),
    Rule(
        id="fast-math",
        action=FLAG,
        covers="`--use_fast_math`, `-ftz=true`, `-prec-div=false`, `-prec-sqrt=false`",
        reason="relaxes float32 accuracy under a tight tolerance",
        fp32_strict_only=True,
        applies_to="flags",
    ),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in POLICY}


def policy_markdown() -> str:
    """The policy as a Markdown table (reproduced verbatim in ``docs/integrity.md``)."""
    rows = ["| rule | action | matches | why |", "| --- | --- | --- | --- |"]
    for rule in POLICY:
        action = rule.action + (" (fp32-strict tasks)" if rule.fp32_strict_only else "")
        rows.append(f"| `{rule.id}` | {action} | {rule.covers} | {rule.reason} |")
    return "\n".join(rows) + "\n"
