"""One translation unit from a plan and a configuration per kernel: the template kernel's source.

The file starts with a marker line ``// optiml-template: {...}`` holding the configurations
(JSON), so any template kernel can be read back (:func:`read_marker`) and edited structurally.
``optiml_forward`` checks the ABI (counts, dtypes, ranks), lays out the workspace (values one
kernel writes and a later one reads, then each kernel's own scratch) and launches the kernels in
order on ``stream``. Sizes are read from the ABI tensors at every call.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from optiml.graph.sizes import SizeResolver
from optiml.kernel.source import KernelSource
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    Operand,
    RenderContext,
    Template,
    TemplateError,
    arithmetic_type,
    c_type,
)
from optiml.templates.cexpr import DEVICE_INCLUDE
from optiml.templates.group import Group
from optiml.templates.plan import Plan
from optiml.templates.registry import family

MARKER = "// optiml-template:"
_ABI_DTYPE = {
    "float32": "OPTIML_FLOAT32",
    "float16": "OPTIML_FLOAT16",
    "bfloat16": "OPTIML_BFLOAT16",
    "float64": "OPTIML_FLOAT64",
    "int32": "OPTIML_INT32",
    "int64": "OPTIML_INT64",
    "int8": "OPTIML_INT8",
    "uint8": "OPTIML_UINT8",
    "bool": "OPTIML_BOOL",
    "int16": "OPTIML_INT16",
}


@dataclass
class Templates:
    """The template of each family (:mod:`optiml.templates.registry`), bound to one task's size resolver;
    each made once, on its first group."""

    sizes: SizeResolver
    made: dict[str, Template] = field(default_factory=dict)

    @classmethod
    def for_plan(cls, plan: Plan) -> Templates:
        return cls(sizes=SizeResolver(list(plan.graphs)))

    def of(self, group: Group) -> Template:
        found = family(group.template)
        if found.name not in self.made:
            self.made[found.name] = found.make(self.sizes)
        return self.made[found.name]


def _workspace_regions(plan: Plan, sizes: SizeResolver) -> list[tuple[int, str]]:
    regions = []
    g = plan.graph
    from_inputs = SizeResolver(list(plan.graphs), inputs_only=True)
    for vid in plan.materialized:
        t = g.type(vid)
        dims = [sizes.dim(vid, d) for d in range(t.ndim)]
        if any("outputs[" in d for d in dims):  # optiml_workspace_bytes sees the inputs only
            with contextlib.suppress(TemplateError):  # else no input dim matches: the assembler says so
                dims = [from_inputs.dim(vid, d) for d in range(t.ndim)]
        numel = " * ".join(dims) or "(int64_t)1"
        regions.append((vid, f"(({numel}) * (int64_t)sizeof({c_type(t.dtype)}) + 255) / 256 * 256"))
    return regions


def render(plan: Plan, configs: Sequence[GroupConfig], facts: DeviceFacts | None = None) -> KernelSource:
    """The source of the plan's kernels under ``configs`` (one per group); raises TemplateError."""
    facts = facts or DeviceFacts()
    if len(configs) != len(plan.groups):
        raise TemplateError(f"{len(configs)} configurations for {len(plan.groups)} kernels")
    templates = Templates.for_plan(plan)
    g = plan.graph
    sizes = templates.sizes
    regions = _workspace_regions(plan, sizes)
    region_ptr = {vid: f"(ws_base + ws_off_v{vid})" for vid, _ in regions}

    def pointer(vid: int, const: bool) -> Operand:
        if vid in plan.strided:  # a slice read in place: its source's memory (the row kernel adds the offset)
            return pointer(plan.strided[vid], const)
        stored = plan.storage(vid)
        dtype = g.type(vid).dtype
        ctype = c_type(dtype)
        qual = "const " if const else ""
        written = [k for k, o in enumerate(g.outputs) if plan.storage(o) == stored]
        if written:
            return Operand(f"(({qual}{ctype}*)outputs[{written[0]}].data)", ctype)
        if stored in g.inputs:
            return Operand(f"(({qual}{ctype}*)inputs[{g.inputs.index(stored)}].data)", ctype)
        if stored in region_ptr:
            return Operand(f"(({qual}{ctype}*){region_ptr[stored]})", ctype)
        raise TemplateError(f"internal: value {vid} has no storage")

    codes: list[KernelCode] = []
    for group, config in zip(plan.groups, configs, strict=True):
        template = templates.of(group)
        reason = template.space(group, facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"kernel {group.index} ({group.describe()}): {reason}")
        ctx = RenderContext(
            prefix=group.prefix,
            inputs=[pointer(v, True) for v in group.inputs],
            outputs=[pointer(v, False) for v in group.outputs],
            dims=sizes.dim,
            compute_type=arithmetic_type(g.type(group.inputs[0]).dtype if group.inputs else "float32"),
            workspace=f"(ws_base + ws_off_g{group.index})",
            facts=facts,
        )
        codes.append(template.render(group, config, ctx))
    return KernelSource(_unit(plan, configs, _share_device_code(plan.groups, codes), regions))


_TEMPORARY = re.compile(r"\be(\d+)\b")  # an epilogue's local named by its graph value (e1160)


def _renumbered_temporaries(code: str) -> str:
    """``code`` with its value-named locals numbered by first appearance (the same code for another block)."""
    order: dict[str, int] = {}
    return _TEMPORARY.sub(lambda m: f"e#{order.setdefault(m[1], len(order))}", code)


def _share_device_code(groups: Sequence[Group], codes: list[KernelCode]) -> list[KernelCode]:
    """A kernel whose device code equals an earlier kernel's but for its prefix launches the earlier
    kernel's code (its own device code is dropped, its host code renamed): a deep network repeats
    its blocks, and nvcc's time grows with the kernels a file defines (ResNet-101: 107 kernels)."""
    defined: dict[str, str] = {}  # device code with its prefix replaced → the prefix that defines it
    shared = []
    for group, code in zip(groups, codes, strict=True):
        own = re.compile(rf"\b{re.escape(group.prefix)}(?![0-9A-Za-z])")  # g8_io, g8:, not g80 or ws_off_g8
        key = _renumbered_temporaries(own.sub("@", code.device))
        first = defined.setdefault(key, group.prefix)
        if first == group.prefix:
            shared.append(code)
            continue
        shared.append(
            KernelCode(
                device=f"// {group.prefix}: the same kernel as {first}",
                host=own.sub(first, code.host),
                workspace_bytes=own.sub(first, code.workspace_bytes),
                includes=code.includes,
            )
        )
    return shared


def _unit(plan: Plan, configs: Sequence[GroupConfig], codes: list[KernelCode], regions: list[tuple[int, str]]) -> str:
    g = plan.graph
    dtypes = {v.type.dtype for v in g.values}
    includes = ['#include "optiml.h"', "#include <stdint.h>", DEVICE_INCLUDE]
    if "float16" in dtypes:
        includes.append("#include <cuda_fp16.h>")
    if "bfloat16" in dtypes:
        includes.append("#include <cuda_bf16.h>")
    for code in codes:
        includes += [f"#include {inc}" for inc in code.includes if f"#include {inc}" not in includes]
    marker = {"plan": plan.describe(), "configs": [c.to_dict() for c in configs]}
    lines = [
        f"{MARKER} {json.dumps(marker, sort_keys=True)}",
        "// Generated by OptiML from the task's op graph (templates, no LLM). Plan: " + plan.describe(),
        *includes,
    ]
    for code in codes:
        lines.append(code.device)
    layout = ["char* ws_base = (char*)workspace; (void)ws_base; int64_t ws_total = 0;"]
    for vid, size in regions:
        layout.append(f"const int64_t ws_off_v{vid} = ws_total; ws_total += {size};")
    for group, code in zip(plan.groups, codes, strict=True):
        layout.append(
            f"const int64_t ws_off_g{group.index} = ws_total; ws_total += (({code.workspace_bytes}) + 255) / 256 * 256;"
        )
    sized = bool(regions) or any(code.workspace_bytes != "0" for code in codes)
    if sized:
        layout = _inputs_only(layout, plan)
    checks = [f"if (n_inputs != {len(g.inputs)} || n_outputs != {len(g.outputs)}) return -1;"]
    for k, vid in enumerate(g.inputs):
        value = g.value(vid)
        if value.scalar:
            continue
        checks.append(
            f"if (inputs[{k}].dtype != {_ABI_DTYPE[value.type.dtype]} || inputs[{k}].ndim != {value.type.ndim}) "
            "return -2;"
        )
    for k, vid in enumerate(g.outputs):
        t = g.type(vid)
        checks.append(f"if (outputs[{k}].dtype != {_ABI_DTYPE[t.dtype]} || outputs[{k}].ndim != {t.ndim}) return -2;")
    forward = [
        "OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,",
        "                                 int n_outputs, void* workspace, size_t workspace_bytes, "
        "cudaStream_t stream) {",
        *("  " + c for c in checks),
        *("  " + c for c in layout),
        "  if (ws_total > 0 && (size_t)ws_total > workspace_bytes) return -3;",
    ]
    for code in codes:
        forward.append("  {\n" + code.host + "\n  }")
    forward += ["  return optiml_check_launch();", "}"]
    lines += forward
    if sized:
        lines += [
            "OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {",
            "  (void)n_inputs; void* workspace = nullptr;",
            *("  " + c for c in layout),
            "  return (size_t)ws_total;",
            "}",
        ]
    return "\n".join(lines) + "\n"


_OUTPUT_DIM = re.compile(r"outputs\[(\d+)\]\.shape\[(\d+)\]")


def _inputs_only(layout: list[str], plan: Plan) -> list[str]:
    """The workspace layout with every output dim it names re-expressed over the inputs (a dim of
    the same size at every shape set, else a constant): ``optiml_workspace_bytes`` sees no outputs,
    and it and ``optiml_forward`` must lay the workspace out alike. A GEMM's split-K workspace sized
    by its M = the batch names the output's dim 0 where the input's dim 0 is the same size."""
    if not any("outputs[" in line for line in layout):
        return layout
    from_inputs = SizeResolver(list(plan.graphs), inputs_only=True)
    g = plan.graph

    def over_inputs(match: re.Match[str]) -> str:
        return from_inputs.dim(g.outputs[int(match.group(1))], int(match.group(2)))

    try:
        layout = [_OUTPUT_DIM.sub(over_inputs, line) for line in layout]
    except TemplateError:
        layout = []
    if not layout or any("outputs[" in line for line in layout):
        raise TemplateError("the workspace size depends on an output's shape (no input dim matches it)")
    return layout


def read_marker(code: str) -> list[GroupConfig] | None:
    """The configurations recorded in a template kernel's first line, or None for other kernels."""
    for line in code.splitlines()[:3]:
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
                return [GroupConfig.from_dict(c) for c in data["configs"]]
            except (ValueError, KeyError, TypeError):
                return None
    return None
