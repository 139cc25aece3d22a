"""Write one case of a task to a folder, so the torch-free profile target can run candidates on it.

Run once per profiler (task, seed, shape set) in the worker's sandbox::

    python -m optiml.profile.case_dump --task TASK.py --seed N --shape-set S --out DIR [--device cuda] \\
        [--report EVENTS.jsonl --gate FILE]

With ``--report`` and ``--gate`` it loads the task (torch's import, the task module), writes a
``ready`` event and waits for ``FILE`` before it touches the device (the profiler's GPU turn).

``DIR/case.json`` describes the ABI arrays, ``DIR/input<i>.bin`` hold the inputs' bytes::

    {"entry_bytes": 160,                    # sizeof(optiml_tensor) as the harness marshals it
     "inputs":  [{"struct": BASE64, "data": "device", "file": "input0.bin", "bytes": N}
                 | {"struct": BASE64, "data": "host", "host": BASE64}, ...],
     "outputs": [{"struct": BASE64, "data": "device", "bytes": N}, ...],
     "input_bytes": N, "output_bytes": N, "device": NAME}

Each ``struct`` is the entry exactly as :class:`optiml.evaluate.abi.TensorArray` fills it, with its
first member (``data``, the pointer) to be relocated by the reader: device entries get a fresh
allocation of ``bytes`` (inputs filled from their file, outputs poisoned), host entries point at
their ``host`` bytes. The inputs are the ones the evaluation uses (``TaskRuntime.case``, the same
contiguous copies the harness hands a candidate), so a profile runs on the timed data.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from optiml.errors import TaskError
from optiml.evaluate.abi import OptimlTensor, TensorArray
from optiml.evaluate.checks import clone_args
from optiml.evaluate.runtime import TaskRuntime
from optiml.profile.light_target import MANIFEST, wait_for_turn
from optiml.task import load_task


def dump_case(
    task_path: str, seed: int, shape_set: int, out: Path, device: str = "cuda", turn: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Write the case and return the manifest; ``turn`` is called once the task is loaded, before the
    device is touched (it waits for the GPU)."""
    task = load_task(task_path)
    if turn is not None:
        turn()
    runtime = TaskRuntime(task, device)
    case = runtime.case(seed, shape_set)
    inputs = clone_args(case.abi_inputs)
    outputs = [torch.empty_like(e, memory_format=torch.contiguous_format) for e in case.expected]
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for index, (value, struct) in enumerate(zip(inputs, _structs(inputs), strict=True)):
        if isinstance(value, torch.Tensor):
            name = f"input{index}.bin"
            _write_tensor(value, out / name)
            entries.append({"struct": struct, "data": "device", "file": name, "bytes": _nbytes(value)})
        else:
            host = TensorArray([value])
            pointer = host.array[0].data
            size = {bool: 1}.get(type(value), 8)
            entries.append({"struct": struct, "data": "host", "host": _b64(ctypes.string_at(pointer, size))})
    manifest = {
        "entry_bytes": ctypes.sizeof(OptimlTensor),
        "inputs": entries,
        "outputs": [
            {"struct": struct, "data": "device", "bytes": _nbytes(value)}
            for value, struct in zip(outputs, _structs(outputs), strict=True)
        ],
        "input_bytes": case.input_bytes(),
        "output_bytes": case.output_bytes(),
        "device": torch.cuda.get_device_name() if device == "cuda" else device,
    }
    (out / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return manifest


def _structs(values: list[Any]) -> list[str]:
    array = TensorArray(values)
    size = ctypes.sizeof(OptimlTensor)
    return [_b64(ctypes.string_at(ctypes.addressof(array.array[i]), size)) for i in range(len(values))]


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _write_tensor(tensor: torch.Tensor, path: Path, chunk_bytes: int = 1 << 28) -> None:
    """The tensor's bytes, copied to the host a chunk at a time (KernelBench inputs reach 8 GiB)."""
    flat = tensor.reshape(-1).view(torch.uint8)
    with path.open("wb") as file:
        for start in range(0, flat.numel(), chunk_bytes):
            file.write(flat[start : start + chunk_bytes].cpu().numpy().tobytes())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _gate(report: Path | None, gate: Path | None) -> Callable[[], None] | None:
    """Wait for the GPU as :class:`optiml.profile.ncu.GpuTurn` expects: a 'ready' event, then the gate file."""
    if report is None or gate is None:
        return None

    def wait() -> None:
        with report.open("a", encoding="utf-8") as events:
            wait_for_turn(events, str(gate))

    return wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optiml.profile.case_dump")
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--shape-set", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--report", type=Path, help="JSON-lines file where a 'ready' event is written (with --gate)")
    parser.add_argument("--gate", type=Path, help="once the task is loaded, say 'ready' and wait for this file")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("case dump: no CUDA device is visible", file=sys.stderr)
        return 2
    try:
        dump_case(args.task, args.seed, args.shape_set, args.out, args.device, _gate(args.report, args.gate))
    except TaskError as exc:
        print(f"case dump: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
