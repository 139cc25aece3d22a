"""Build candidates with ``nvcc --shared``: content-addressed cache, a compile pool, sandboxed nvcc.

A candidate is built once per (source, flags, arch, libraries, nvcc version, ABI header):
the cache key is their hash and the cache entry holds the source, the shared object and
the :class:`CompileResult` as JSON. nvcc is ~1.1 s per candidate on the H200 machine versus ~58 s
for ``torch.utils.cpp_extension.load_inline``, which is why candidates use a C ABI instead of a
torch extension.

Where the time goes (``nvcc --time``, nvcc 13.0, a 70-line softmax, 2-core machine): host
preprocessing 0.09 s, cudafe++ 0.37 s, device preprocessing 0.12 s, cicc 0.34 s, ptxas 0.05 s,
host compile 0.14 s, link 0.08 s — and an *empty* candidate costs 1.29 s of the 1.38 s: nearly all
of it is parsing the 1.1 MB of headers nvcc force-includes (``cuda_runtime.h``) in three front ends.
The host pass cannot be dropped without changing the ABI (``optiml_forward`` is candidate host
code). So the speed comes from elsewhere:

* machine code for the detected GPU only (:func:`gencode`);
* the host code at ``-O1`` and linked by gold, lld or mold where there is one
  (:data:`HOST_OPTIMIZATION`, :func:`fast_linker`): the host compile and the link are the end of the
  build's critical path. (An earlier trial of ``-Xcompiler -O0`` measured nothing because nvcc puts
  its own ``-O3`` after ``-Xcompiler`` flags: the host compiler never saw it.)
* nvcc's own steps, from its ``-dryrun`` listing, rescheduled (:mod:`optiml.kernel.nvcc_steps`):
  the host front end (preprocessing, cudafe++) beside the device one (preprocessing, cicc), then the
  host compile beside ptxas and fatbinary, and no device link (it is empty without ``-rdc``):
  0.63–0.65× of the serial build for the softmax and matmul starters (0.45–0.46 s against
  0.69–0.73 s; the front ends at once alone gave 0.66–0.67×); a template GEMM whose device chain
  dominates gained less (0.85–0.98× with the front ends at once alone);
* a **compile pool** sized to the CPU cores: :meth:`Compiler.submit` / :meth:`Compiler.prefetch`
  start builds in the background (a search prefetches queued candidates while the GPU times
  others) and :meth:`Compiler.compile` joins a build already in flight for the same key;
* a **binary digest** (:mod:`optiml.kernel.identity`) so a candidate whose device and host code
  equal an earlier build's can take over that build's evaluation instead of being timed again.

nvcc runs in the compile sandbox (:mod:`optiml.kernel.compile_sandbox`): only the toolkit, the
host compiler, system headers and the build folder exist for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from optiml.cache_dirs import user_cache_dir
from optiml.cuda_tools import find_cuda_tool
from optiml.errors import ToolchainError
from optiml.integrity.jail import VIEW_STAGE
from optiml.kernel import compile_sandbox, nvcc_steps
from optiml.kernel.identity import IdentityError, binary_digest
from optiml.kernel.ptxas import parse_diagnostics, parse_resources
from optiml.kernel.source import KernelSource
from optiml.values import CompileDiagnostic, CompileResult

DEFAULT_ARCH = "sm_90a"  # H100/H200; used when no GPU is visible and none is configured
BASE_FLAGS = ("-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC", "-Xptxas", "-v")
#: nvcc's ``-O`` is the *host* code's level (cicc and ptxas get the same commands at any level, and ptxas
#: optimises at -O3 by default). A candidate's host code is a launch, and the host compile of cudafe++'s
#: output sits on the build's critical path: ``-O1`` parses the same 1.1 MB but optimises less.
HOST_OPTIMIZATION = "-O1"
#: linkers the host compiler may use instead of GNU ld, fastest first; a candidate's link pulls in the
#: static CUDA runtime, which GNU ld takes ~0.1 s over and gold ~0.05 s (2-core machine, 2026-12-03)
FAST_LINKERS = ("mold", "lld", "gold")
#: sources with at least this many kernels (a multi-kernel plan: a level-3 model's runs to 190) are built with
#: ``-split-compile=0``: cicc and ptxas optimise the kernels on every core. Same machine code, kernel for kernel
#: (the ``.text`` sections of 380 kernels of four level-3 plans compared, nvcc 13.0), and 0.6-0.8x of the
#: device compile's time on a 2-core machine; below it there is nothing to split.
SPLIT_COMPILE_MIN_KERNELS = 4
SPLIT_COMPILE = "-split-compile=0"
SOURCE_NAME = "kernel.cu"
OUTPUT_NAME = "kernel.so"
BUILD_SCRIPT = "build.sh"
KEEP_DIR = ".nvcc"  # nvcc --keep's intermediates, read for the binary digest, then deleted
LISTINGS_DIR = ".nvcc-listings"  # nvcc's -dryrun listings, by command (Compiler._steps)


def include_dir() -> Path:
    """Folder holding ``optiml.h``, shipped as package data."""
    return Path(str(resources.files("optiml.kernel") / "include"))


def abi_header() -> str:
    return (include_dir() / "optiml.h").read_text(encoding="utf-8")


def helper_headers() -> dict[str, str]:
    """The other headers shipped beside ``optiml.h`` (``optiml_tma.h``), by file name."""
    return {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(include_dir().glob("*.h"))
        if path.name != "optiml.h"
    }


#: an ``#include`` of one of our headers (``optiml.h``, ``optiml_tma.h``); group 1 is its file name
SHIPPED_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[\"<](optiml(?:_\w+)?\.h)[\">][^\n]*$", re.MULTILINE)


def included_helper_headers(code: str) -> dict[str, str]:
    """The helper headers ``code`` includes, by file name (what an export must carry beside ``optiml.h``)."""
    included = set(SHIPPED_INCLUDE.findall(code))
    return {name: text for name, text in helper_headers().items() if name in included}


def gencode(arch: str) -> str:
    """Machine code for ``arch`` only (``sm_90a`` → ``-gencode=arch=compute_90a,code=sm_90a``).

    ``-arch=sm_90a`` also embeds PTX, which nothing here runs (candidates are built for the GPU
    they are timed on); leaving it out cut a template kernel's build from 2.2 s to 1.3 s (nvcc 13.0,
    2-core machine, 2026-12-01). An ``-arch``-style value that is not ``sm_NN[a]`` is passed through.
    """
    if not arch.startswith("sm_"):
        return f"-arch={arch}"
    return f"-gencode=arch=compute_{arch[3:]},code={arch}"


def nvcc_command(
    nvcc: str,
    arch: str,
    flags: Sequence[str] = (),
    libraries: Sequence[str] = (),
    host: Sequence[str] = (HOST_OPTIMIZATION,),
) -> list[str]:
    """A candidate's nvcc build, run in its build folder (paths relative to it); ``host``: flags of the
    host compile and link only (:attr:`Compiler.host_flags`)."""
    return [
        nvcc,
        "--shared",
        *BASE_FLAGS,
        *host,
        gencode(arch),
        f"-I{include_dir()}",
        *flags,
        "--keep",
        "--keep-dir",
        KEEP_DIR,
        "-o",
        OUTPUT_NAME,
        SOURCE_NAME,
        *(f"-l{name}" for name in libraries),
    ]


def splits_compile(version: str) -> bool:
    """Whether nvcc of ``version`` (``nvcc --version``'s last line) has ``-split-compile`` (CUDA 12.1+)."""
    found = re.search(r"cuda_(\d+)\.(\d+)", version)
    return found is not None and (int(found[1]), int(found[2])) >= (12, 1)


def find_nvcc() -> str:
    """nvcc wherever :func:`~optiml.cuda_tools.find_cuda_tool` looks; `ToolchainError` when it is nowhere."""
    path = find_cuda_tool("nvcc")
    if path is None:
        raise ToolchainError(
            "nvcc not found: install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) and put nvcc on PATH"
        )
    return path


@lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"{nvcc} --version failed: {exc}") from exc
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else out.strip()


@lru_cache(maxsize=4)
def fast_linker(host_compiler: str | None) -> str | None:
    """The first of :data:`FAST_LINKERS` that ``host_compiler`` links a shared library with, or None
    (its default linker): one trial link of an empty library per linker, once per process."""
    if host_compiler is None:
        return None
    with tempfile.TemporaryDirectory(prefix="optiml-linker-") as folder:
        source = Path(folder) / "empty.c"
        source.write_text("int optiml_linker_probe;\n", encoding="utf-8")
        for linker in FAST_LINKERS:
            probe = [host_compiler, f"-fuse-ld={linker}", "-shared", "-fPIC", "-o", f"{folder}/probe.so", str(source)]
            try:
                linked = subprocess.run(probe, capture_output=True, timeout=30, check=False)
            except (OSError, subprocess.SubprocessError):
                continue
            if linked.returncode == 0:
                return linker
    return None


@lru_cache(maxsize=1)
def detect_arch() -> str | None:
    """``sm_XY`` of GPU 0 from nvidia-smi (``sm_90a`` on Hopper), or None without a GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[0].strip() if out.strip() else ""
    if "." not in first:
        return None
    major, minor = first.split(".", 1)
    arch = f"sm_{major}{minor}"
    return arch + "a" if arch == "sm_90" else arch


@dataclass(frozen=True)
class CompilerConfig:
    arch: str | None = None  # None: detect the GPU, else DEFAULT_ARCH
    cache_dir: Path = field(default_factory=lambda: user_cache_dir("kernels"))
    timeout_s: float = 180.0
    jobs: int = 0  # compile pool size; 0 = number of CPUs
    libraries: tuple[str, ...] = ()  # -l<name> for libraries a task allows
    #: nvcc in the view sandbox: None where the host allows it, True required (else an error), False off
    sandbox: bool | None = None
    view: tuple[str, ...] = ()  # extra paths nvcc may read in the sandbox (e.g. a library's headers)
    parallel_steps: bool = True  # nvcc's steps rescheduled, chains side by side (optiml.kernel.nvcc_steps)
    host_optimization: str = HOST_OPTIMIZATION  # nvcc's -O: the host code's level only
    fast_linker: bool = True  # link with mold, lld or gold where the host compiler has one (FAST_LINKERS)


class Compiler:
    """Compiles candidates to shared objects, caching by content. Thread-safe."""

    def __init__(self, config: CompilerConfig | None = None) -> None:
        self.config = config or CompilerConfig()
        self.nvcc = find_nvcc()
        self.version = nvcc_version(self.nvcc)
        self.arch = self.config.arch or detect_arch() or DEFAULT_ARCH
        self.split_compile = splits_compile(self.version)
        self.jobs = self.config.jobs or os.cpu_count() or 1
        headers = [abi_header(), *(f"{name}\0{text}" for name, text in helper_headers().items())]
        self._header_hash = hashlib.sha256("\0".join(headers).encode()).hexdigest()[:12]
        self._view: tuple[str, ...] | None = None
        # Re-entrant: a future that is already done runs its done-callback (which takes this lock)
        # inline from ``add_done_callback``, inside :meth:`submit`'s critical section.
        self._lock = threading.RLock()
        self._in_flight: dict[str, Future[CompileResult]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._listings: dict[tuple[str, ...], nvcc_steps.NvccSteps | None] = {}
        self._shell = shutil.which("sh") or "/bin/sh"
        linker = fast_linker(shutil.which("g++")) if self.config.fast_linker else None
        self.host_flags: tuple[str, ...] = (self.config.host_optimization,)
        if linker is not None:
            self.host_flags += ("-Xcompiler", f"-fuse-ld={linker}")

    def build_flags(self, kernel: KernelSource) -> tuple[str, ...]:
        """``kernel``'s own flags, and :data:`SPLIT_COMPILE` where it has many kernels and nvcc splits."""
        many = kernel.code.count("__global__") >= SPLIT_COMPILE_MIN_KERNELS
        return (*kernel.flags, SPLIT_COMPILE) if many and self.split_compile else kernel.flags

    def cache_key(self, kernel: KernelSource) -> str:
        parts = [
            kernel.code,
            "\0".join(self.build_flags(kernel)),
            self.arch,
            self.version,
            self._header_hash,
            ",".join(self.config.libraries),
            "\0".join(self.host_flags),
        ]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]

    def command(self, kernel: KernelSource) -> list[str]:
        """The nvcc command, run in the build folder (paths relative to it)."""
        return nvcc_command(self.nvcc, self.arch, self.build_flags(kernel), self.config.libraries, self.host_flags)

    @property
    def view(self) -> tuple[str, ...]:
        """The paths nvcc sees in the compile sandbox."""
        if self._view is None:
            self._view = compile_sandbox.compile_view(self.nvcc, [include_dir()], self.config.view)
        return self._view

    # -- the pool ----------------------------------------------------------------------------
    def submit(self, kernel: KernelSource) -> Future[CompileResult]:
        """Build ``kernel`` on the compile pool; the same key already in flight returns its future."""
        key = self.cache_key(kernel)
        with self._lock:
            future = self._in_flight.get(key)
            if future is None:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="optiml-compile")
                future = self._pool.submit(self._build, kernel, key)
                self._track(key, future)
        return future

    def prefetch(self, kernels: Sequence[KernelSource]) -> list[Future[CompileResult]]:
        """Start building ``kernels`` in the background (cache hits finish at once); a later
        :meth:`compile` of any of them waits for its build instead of starting another."""
        return [self.submit(kernel) for kernel in kernels]

    def compile(self, kernel: KernelSource) -> CompileResult:
        """Build ``kernel`` in this thread, or wait for its build if one is in flight."""
        key = self.cache_key(kernel)
        with self._lock:
            future = self._in_flight.get(key)
            mine = future is None
            if future is None:
                future = Future()
                self._track(key, future)
        if not mine:
            return future.result()
        try:
            result = self._build(kernel, key)
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(result)
        return result

    def compile_many(self, kernels: Sequence[KernelSource]) -> list[CompileResult]:
        """Compile on the pool (in parallel across CPU cores); results in input order."""
        return [future.result() for future in self.prefetch(kernels)]

    def close(self) -> None:
        """Stop the pool: queued builds are dropped, running ones finish."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _track(self, key: str, future: Future[CompileResult]) -> None:
        self._in_flight[key] = future

        def forget(_: Future[CompileResult]) -> None:
            with self._lock:
                if self._in_flight.get(key) is future:
                    del self._in_flight[key]

        future.add_done_callback(forget)

    # -- one build ---------------------------------------------------------------------------
    def _build(self, kernel: KernelSource, key: str) -> CompileResult:
        entry = self.config.cache_dir / key
        cached = self._load_cached(entry)
        if cached is not None:
            return cached
        entry.parent.mkdir(parents=True, exist_ok=True)
        # Build in a private folder, then rename into place: concurrent builds never see half a file.
        work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=entry.parent)).resolve()
        source, output = work / SOURCE_NAME, work / OUTPUT_NAME
        source.write_text(kernel.code, encoding="utf-8")
        (work / KEEP_DIR).mkdir()
        cmd = self.command(kernel)
        start = time.perf_counter()
        try:
            argv = self._parallel_build(cmd, work, key) or cmd
            run = compile_sandbox.run_tool(argv, work, self.view, self.config.timeout_s, sandbox=self.config.sandbox)
        except BaseException:  # a toolchain fault, or Ctrl-C (the build was stopped): nothing to keep
            shutil.rmtree(work, ignore_errors=True)
            raise
        (work / BUILD_SCRIPT).unlink(missing_ok=True)
        seconds = time.perf_counter() - start
        log = run.output if not run.timed_out else f"nvcc timed out after {self.config.timeout_s:.0f} s"
        ok = run.returncode == 0 and output.is_file()
        diagnostics = parse_diagnostics(log, SOURCE_NAME)
        if not ok and not any(d.severity == "error" for d in diagnostics):
            tail = log.strip().splitlines()[-1] if log.strip() else "nvcc failed without a message"
            diagnostics.append(CompileDiagnostic(severity="error", message=tail))
        identity = ""
        if ok:
            try:
                identity = binary_digest(work / KEEP_DIR, source.stem, kernel.flags, self.config.libraries)
            except IdentityError:
                identity = ""  # an unusual nvcc layout: the build stands, it just cannot be deduplicated
        shutil.rmtree(work / KEEP_DIR, ignore_errors=True)
        stage = work / VIEW_STAGE  # the jail's staging folder, empty outside its namespace
        if stage.is_dir():
            stage.rmdir()
        result = CompileResult(
            ok=ok,
            so_path=str(entry / "kernel.so") if ok else None,
            digest=kernel.digest,
            arch=self.arch,
            seconds=seconds,
            cached=False,
            diagnostics=tuple(diagnostics),
            resources=tuple(parse_resources(log)),
            command=tuple(cmd),
            log=log[-20000:],
            binary_digest=identity,
            sandbox=run.sandbox,
        )
        (work / "result.json").write_text(json.dumps(result.to_dict()), encoding="utf-8")
        try:
            work.rename(entry)
        except OSError:  # another thread or process built the same key first: use theirs
            shutil.rmtree(work, ignore_errors=True)
        return result

    def _parallel_build(self, cmd: list[str], work: Path, key: str) -> list[str] | None:
        """``sh build.sh``: nvcc's steps with its chains side by side (:mod:`optiml.kernel.nvcc_steps`);
        None where nvcc's listing has another shape or ``parallel_steps`` is off."""
        if not self.config.parallel_steps:
            return None
        steps = self._steps(tuple(cmd), work)
        if steps is None:
            return None
        script = nvcc_steps.parallel_script(steps, nvcc_steps.module_id(key, SOURCE_NAME), KEEP_DIR)
        (work / BUILD_SCRIPT).write_text(script, encoding="utf-8")
        return [self._shell, BUILD_SCRIPT]

    def _steps(self, cmd: tuple[str, ...], work: Path) -> nvcc_steps.NvccSteps | None:
        """nvcc's listing for ``cmd`` (``-dryrun``, in the sandbox nvcc itself would run in), parsed
        once per command: every build of the same flags runs the same steps in its own folder. The
        listing is kept in the cache folder too, so a new process (each ``optiml eval``) does not pay
        for the dry run (0.1-0.3 s) on its first build."""
        with self._lock:
            if cmd in self._listings:
                return self._listings[cmd]
        kept = self._kept_listing(cmd)
        try:
            listing = kept.read_text(encoding="utf-8")
        except OSError:
            dry = nvcc_steps.dryrun(cmd)
            run = compile_sandbox.run_tool(dry, work, self.view, self.config.timeout_s, sandbox=self.config.sandbox)
            listing = run.output if run.returncode == 0 else ""
            if listing:
                self._keep_listing(kept, listing)
        steps = nvcc_steps.parse_dryrun(listing) if listing else None
        with self._lock:
            self._listings[cmd] = steps
        return steps

    def _kept_listing(self, cmd: tuple[str, ...]) -> Path:
        """Where the listing of ``cmd`` is kept: per nvcc (its path and version), command and sandbox mode."""
        parts = [self.nvcc, self.version, str(self.config.sandbox), *cmd]
        key = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]
        return self.config.cache_dir / LISTINGS_DIR / f"{key}.txt"

    @staticmethod
    def _keep_listing(path: Path, listing: str) -> None:
        """Write ``listing`` to ``path`` whole or not at all (a rename), ignoring a cache folder that refuses."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as handle:
                handle.write(listing)
            Path(handle.name).replace(path)
        except OSError:
            return

    def _load_cached(self, entry: Path) -> CompileResult | None:
        meta = entry / "result.json"
        if not meta.is_file():
            return None
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            result = CompileResult.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        so_path = str(entry / "kernel.so") if result.ok else None
        if result.ok and not Path(str(so_path)).is_file():
            return None
        return CompileResult(**{**result.__dict__, "so_path": so_path, "cached": True, "seconds": 0.0})
