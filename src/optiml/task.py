"""Tasks: a PyTorch reference in KernelBench format, plus optional OptiML metadata.

A task file is a plain KernelBench problem::

    M = 4096                                # sizes are module globals ...
    class Model(nn.Module): ...
    def get_inputs(): return [torch.rand(M, M)]   # ... read by the input generators
    def get_init_inputs(): return []

and may carry a module-level dict ``OPTIML`` (every key optional)::

    OPTIML = {
        "description": "row softmax",
        "dtype": "float32",            # floating inputs and parameters are cast to it
        "atol": 1e-4, "rtol": 1e-4,     # |out - ref| <= atol + rtol * |ref|
        "shape_sets": [{"M": 1000}],    # extra shape sets: overrides of module globals
        "flops": "5*M*M",              # useful flops of one forward, an expression over globals
        "libraries": ["cublas"],       # libraries a candidate may link
        "distributions": ["native", "normal"],  # input distributions verification draws from
        "mode": "train",               # or "eval": model.eval() before the reference runs
        "precision": "exact",          # or "tf32": the reference at PyTorch's default settings
    }

Without ``distributions``, verification uses ``native`` (the file's own ``get_inputs``) and ``normal``
(signed values: KernelBench draws ``torch.rand``, all >= 0, where ``y = x`` passes for ReLU); the
default ``normal`` is dropped for a task whose reference is not finite on it (``log``, ``sqrt``, …).

``mode``: the reference runs as KernelBench builds it, ``"train"`` by default: ``Model`` as its
``__init__`` leaves it (PyTorch's training mode, unless the file itself calls ``.eval()``), so
BatchNorm normalises by the batch's statistics, and an active Dropout (0 < p < 1) — whose output
is random — is refused. ``"eval"`` calls ``model.eval()``: running statistics, Dropout the identity.

``precision``: ``"exact"`` (default) computes the reference in true fp32 (TF32 off everywhere, half
GEMMs reduced in fp32), so candidates must reach fp32 accuracy. ``"tf32"`` (float32 tasks) computes it
under PyTorch's default settings — cuDNN convolutions in TF32, as KernelBench's reference runs —
with the default tolerance atol = rtol = 1e-2 (TF32 keeps fp16's 10 mantissa bits; KernelBench's
fp16 tolerance), and candidates may use TF32: a kernel is compared with the baseline at the
baseline's precision.

Shape set 0 is the file as written; set ``k >= 1`` is ``shape_sets[k-1]`` applied on top.
Only floating-point inputs are cast to the task's dtype: integer targets and boolean
masks keep theirs (KernelBench's harness casts everything, its issue #151).

This module is imported by the GPU worker: standard library, NumPy and torch only.
"""

from __future__ import annotations

import ast
import hashlib
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optiml.errors import TaskError

DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64")
DISTRIBUTIONS = ("native", "normal", "uniform_pm1")
SIGNED_DISTRIBUTIONS = ("normal", "uniform_pm1")  # floating inputs redrawn with negative values too
DEFAULT_DISTRIBUTIONS = ("native", "normal")
MODES = ("train", "eval")  # the reference's module mode: as built (KernelBench's), or model.eval()
PRECISIONS = ("exact", "tf32")  # the reference's arithmetic: true fp32, or PyTorch's defaults (TF32 convs)
_META_KEYS = {
    "description",
    "dtype",
    "atol",
    "rtol",
    "shape_sets",
    "flops",
    "libraries",
    "distributions",
    "mode",
    "precision",
}
_DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-7, "float16": 1e-2, "bfloat16": 2e-2}
TF32_TOLERANCE = 1e-2  # fp32 under precision "tf32": TF32 has fp16's 10-bit mantissa, so fp16's tolerance


@dataclass(frozen=True)
class TaskMeta:
    """The optional ``OPTIML`` dict of a task file, validated and with defaults filled in."""

    description: str = ""
    dtype: str = "float32"
    atol: float = 1e-4
    rtol: float = 1e-4
    shape_sets: tuple[Mapping[str, Any], ...] = ()
    flops: str | None = None
    libraries: tuple[str, ...] = ()
    distributions: tuple[str, ...] = DEFAULT_DISTRIBUTIONS
    distributions_given: bool = False  # the file chose them: kept even where the reference is not finite
    mode: str = "train"  # see MODES
    precision: str = "exact"  # see PRECISIONS

    def to_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "dtype": self.dtype,
            "atol": self.atol,
            "rtol": self.rtol,
            "shape_sets": [dict(s) for s in self.shape_sets],
            "flops": self.flops,
            "libraries": list(self.libraries),
            "distributions": list(self.distributions),
            "mode": self.mode,
            "precision": self.precision,
        }


@dataclass(frozen=True)
class Task:
    """A loaded, statically checked task. Running it needs torch (see :mod:`optiml.task_runtime`)."""

    path: Path  # resolved: what workers and the run store use
    name: str
    source: str
    meta: TaskMeta
    globals_: tuple[str, ...] = field(default=())
    given: str = ""  # the path as the user gave it: what messages show
    #: each convolution's arithmetic in the default-settings reference as the judge measured it (signature,
    #: "tf32" | "exact"): set after preparing (:meth:`optiml.workflow.Workflow.prepare`); the planner follows it
    convolution_arithmetic: tuple[tuple[str, str], ...] = ()

    @property
    def shown(self) -> str:
        """The task's path for messages: as the user gave it (else the resolved one)."""
        return self.given or str(self.path)

    @property
    def num_shape_sets(self) -> int:
        return 1 + len(self.meta.shape_sets)

    @property
    def digest(self) -> str:
        """Content hash: the source decides everything about a task."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def naive_kernel_path(self) -> Path | None:
        """``<stem>.naive.cu`` beside the task file, if the task ships one."""
        candidate = self.path.with_name(self.path.stem + ".naive.cu")
        return candidate if candidate.is_file() else None

    def overrides(self, shape_set: int) -> Mapping[str, Any]:
        if not 0 <= shape_set < self.num_shape_sets:
            raise TaskError(f"{self.path}: no shape set {shape_set} (it has {self.num_shape_sets})")
        return {} if shape_set == 0 else self.meta.shape_sets[shape_set - 1]

    def namespace(self, shape_set: int = 0) -> types.ModuleType:
        """Execute the task source in a fresh module, then apply the shape set's overrides."""
        module = types.ModuleType(f"optiml_task_{self.name}")
        module.__file__ = str(self.path)
        try:
            exec(compile(self.source, str(self.path), "exec"), module.__dict__)
        except ModuleNotFoundError as exc:  # a package the task imports (KernelBench's Mamba2 files: einops)
            hint = f" (install it: pip install {exc.name.split('.')[0]})" if exc.name else ""
            raise TaskError(f"{self.path}: executing the task failed: ModuleNotFoundError: {exc}{hint}") from exc
        except Exception as exc:  # the file's own code failed: report it, do not crash
            raise TaskError(f"{self.path}: executing the task failed: {type(exc).__name__}: {exc}") from exc
        for key, value in self.overrides(shape_set).items():
            setattr(module, key, value)
        return module

    def flops(self, shape_set: int = 0) -> float | None:
        """Useful flops of one forward at a shape set, from the ``flops`` expression."""
        if self.meta.flops is None:
            return None
        env = {k: v for k, v in self.namespace_globals(shape_set).items() if isinstance(v, (int, float))}
        try:
            value = eval(self.meta.flops, {"__builtins__": {}, "math": math}, env)
        except Exception as exc:
            raise TaskError(f"{self.path}: OPTIML['flops'] = {self.meta.flops!r} failed: {exc}") from exc
        return float(value)

    def namespace_globals(self, shape_set: int = 0) -> dict[str, Any]:
        """The task's module-level constants at a shape set, without executing the file."""
        values: dict[str, Any] = {}
        for node in ast.parse(self.source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
        values.update(self.overrides(shape_set))
        return values


def load_task(path: str | Path) -> Task:
    """Read and statically check a KernelBench-format task file.

    Raises :class:`TaskError` with a one-line ``"<file>: <cause>"`` message for a missing file,
    a syntax error, a missing ``Model``/``get_inputs``/``get_init_inputs``, or bad metadata.
    Checks that need torch (outputs are tensors, inputs reproducible) live in
    :func:`optiml.task_runtime.check_task`.
    """
    file = Path(path)
    if file.is_dir():
        raise TaskError(f"{file}: is a folder; give a task file (a KernelBench-format .py), or `optiml bench` a folder")
    if not file.is_file():
        raise TaskError(f"{file}: no such task file")
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{file}: cannot read: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(file))
    except SyntaxError as exc:
        raise TaskError(f"{file}: syntax error on line {exc.lineno}: {exc.msg}") from exc

    defined = _top_level_names(tree)
    if "Model" not in defined["class"]:
        raise TaskError(f"{file}: no `class Model(nn.Module)` defined at module level")
    for func in ("get_inputs", "get_init_inputs"):
        if func not in defined["def"]:
            raise TaskError(f"{file}: no `{func}()` function defined at module level")

    meta = _parse_meta(file, tree)
    _check_shape_set_keys(file, meta, defined["assign"])
    return Task(
        path=file.resolve(),
        name=file.stem,
        source=source,
        meta=meta,
        globals_=tuple(sorted(defined["assign"])),
        given=str(file),
    )


def _check_shape_set_keys(file: Path, meta: TaskMeta, globals_: set[str]) -> None:
    """A shape set overrides module globals; a key that is none of them would be ignored silently."""
    for index, shape_set in enumerate(meta.shape_sets):
        unknown = sorted(k for k in shape_set if k not in globals_)
        if unknown:
            names = ", ".join(sorted(globals_ - {"OPTIML"})) or "none"
            raise TaskError(
                f"{file}: OPTIML['shape_sets'][{index}] sets {', '.join(map(repr, unknown))}, which "
                f"{'is not a module-level global' if len(unknown) == 1 else 'are not module-level globals'}"
                f" (the globals: {names})"
            )


def _top_level_names(tree: ast.Module) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {"class": set(), "def": set(), "assign": set()}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names["class"].add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names["def"].add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:  # `M = 4` and `M, N = 4, 8`
                elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                names["assign"].update(t.id for t in elements if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names["assign"].add(node.target.id)
    return names


def _parse_meta(file: Path, tree: ast.Module) -> TaskMeta:
    raw: Any = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OPTIML" for t in node.targets):
            try:
                raw = ast.literal_eval(node.value)
            except ValueError as exc:
                raise TaskError(f"{file}: OPTIML must be a literal dict (no calls or names): {exc}") from exc
    if raw is None:
        return TaskMeta()
    if not isinstance(raw, dict):
        raise TaskError(f"{file}: OPTIML must be a dict, got {type(raw).__name__}")
    unknown = set(raw) - _META_KEYS
    if unknown:
        raise TaskError(f"{file}: OPTIML has unknown keys {sorted(unknown)}; allowed: {sorted(_META_KEYS)}")

    dtype = raw.get("dtype", "float32")
    if dtype not in DTYPE_NAMES:
        raise TaskError(f"{file}: OPTIML['dtype'] = {dtype!r}; expected one of {DTYPE_NAMES}")
    mode = raw.get("mode", "train")
    if mode not in MODES:
        raise TaskError(f"{file}: OPTIML['mode'] = {mode!r}; expected one of {MODES}")
    precision = raw.get("precision", "exact")
    if precision not in PRECISIONS:
        raise TaskError(f"{file}: OPTIML['precision'] = {precision!r}; expected one of {PRECISIONS}")
    if precision == "tf32" and dtype != "float32":
        raise TaskError(f"{file}: OPTIML['precision'] = 'tf32' is for float32 tasks (this one is {dtype})")
    tolerance = TF32_TOLERANCE if precision == "tf32" else _DEFAULT_TOLERANCE[dtype]
    atol = _non_negative(file, raw, "atol", tolerance)
    rtol = _non_negative(file, raw, "rtol", tolerance)
    shape_sets = raw.get("shape_sets", [])
    if not isinstance(shape_sets, Sequence) or not all(
        isinstance(s, dict) and all(isinstance(k, str) for k in s) for s in shape_sets
    ):
        raise TaskError(f"{file}: OPTIML['shape_sets'] must be a list of dicts of global overrides")
    flops = raw.get("flops")
    if flops is not None:
        flops = str(flops)
        try:
            ast.parse(flops, mode="eval")
        except SyntaxError as exc:
            raise TaskError(f"{file}: OPTIML['flops'] is not an expression: {flops!r}") from exc
    libraries = raw.get("libraries", [])
    if not isinstance(libraries, Sequence) or not all(isinstance(x, str) for x in libraries):
        raise TaskError(f"{file}: OPTIML['libraries'] must be a list of library names")
    distributions = tuple(raw.get("distributions", DEFAULT_DISTRIBUTIONS))
    bad = [d for d in distributions if d not in DISTRIBUTIONS]
    if bad or not distributions:
        raise TaskError(f"{file}: OPTIML['distributions'] {bad or '[]'} invalid; choose from {DISTRIBUTIONS}")
    return TaskMeta(
        description=str(raw.get("description", "")),
        dtype=dtype,
        atol=atol,
        rtol=rtol,
        shape_sets=tuple(dict(s) for s in shape_sets),
        flops=flops,
        libraries=tuple(libraries),
        distributions=distributions,
        distributions_given="distributions" in raw,
        mode=mode,
        precision=precision,
    )


def _non_negative(file: Path, raw: Mapping[str, Any], key: str, default: float) -> float:
    value = raw.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or math.isnan(value):
        raise TaskError(f"{file}: OPTIML[{key!r}] must be a non-negative number, got {value!r}")
    return float(value)
