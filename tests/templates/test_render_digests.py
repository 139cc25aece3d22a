"""benchmarks/render_digests.py, the refactor proof: it hashes real sources and notices a changed one."""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path
from types import ModuleType

from optiml.task import load_task
from optiml.templates.kernels import template_kernels

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "tasks" / "softmax.py"


def render_digests() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("render_digests")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_each_seed_is_the_hash_of_its_source_and_flags() -> None:
    record = render_digests().digest_task(str(SOFTMAX), neighbours=False)
    kernels = template_kernels(load_task(SOFTMAX))
    seeds = kernels.seeds()
    assert record["status"] == "planned" and len(record["renders"]) == len(seeds)
    for config in seeds:
        source = kernels.render(config)
        want = hashlib.sha256((source.code + "\0" + "\0".join(source.flags)).encode()).hexdigest()
        assert record["renders"][" | ".join(c.label() for c in config)] == want


def test_a_changed_source_a_refusal_and_a_new_task_are_each_a_difference() -> None:
    module = render_digests()
    before = {"a.py": module.digest_task(str(SOFTMAX), neighbours=False), "b.py": {"status": "refused", "message": "x"}}
    after = {key: dict(value) for key, value in before.items()}
    key = next(iter(after["a.py"]["renders"]))
    after["a.py"]["renders"] = {**after["a.py"]["renders"], key: "0" * 64}
    after["b.py"] = {"status": "refused", "message": "y"}
    after["c.py"] = {"status": "refused", "message": "z"}
    lines = module.differences(before, after)
    assert len(lines) == 3
    assert lines[0].startswith("a.py: 1 render(s) differ") and "b.py" in lines[1] and "only in the new" in lines[2]
    assert module.differences(before, before) == []
