"""The ABI descriptors a kernel receives by value: only the ones its device code names.

Fused loads and stores are written against the host names ``inputs[k]`` / ``outputs[k]`` (data
pointers, shapes of broadcast operands); a kernel that evaluates them in device code receives
those descriptors in a by-value struct. Copying every descriptor of the task would overflow CUDA's
32 764-byte kernel parameter space on a network with many parameters (ResNet-101 has 627 ABI
inputs of 152 bytes each), so the device code's references are renumbered to a dense array of the
descriptors it actually uses, and the host copies just those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REFERENCE = re.compile(r"\b(inputs|outputs)\[(\d+)\]")


@dataclass(frozen=True)
class UsedDescriptors:
    """ABI indices of the descriptors device code names, in slot order (slot j holds index ``inputs[j]``)."""

    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()

    @property
    def input_slots(self) -> int:
        return max(1, len(self.inputs))  # a C array needs one element

    @property
    def output_slots(self) -> int:
        return max(1, len(self.outputs))

    def fill(self, args: str) -> list[str]:
        """Host statements copying the used descriptors into ``args.in`` / ``args.out``."""
        lines = [f"{args}.in[{slot}] = inputs[{index}];" for slot, index in enumerate(self.inputs)]
        return lines + [f"{args}.out[{slot}] = outputs[{index}];" for slot, index in enumerate(self.outputs)]


def compact_descriptors(device_code: str) -> tuple[str, UsedDescriptors]:
    """``device_code`` with ``inputs[k]`` / ``outputs[k]`` renumbered to their slots, and the slots."""
    found: dict[str, set[int]] = {"inputs": set(), "outputs": set()}
    for match in _REFERENCE.finditer(device_code):
        found[match[1]].add(int(match[2]))
    slots = {name: {index: slot for slot, index in enumerate(sorted(seen))} for name, seen in found.items()}
    rewritten = _REFERENCE.sub(lambda m: f"{m[1]}[{slots[m[1]][int(m[2])]}]", device_code)
    return rewritten, UsedDescriptors(tuple(sorted(found["inputs"])), tuple(sorted(found["outputs"])))
