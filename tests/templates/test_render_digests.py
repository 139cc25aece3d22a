"""benchmarks/render_digests.py, the refactor proof: it hashes real sources and notices a changed one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import ModuleType

from benchmark_scripts import benchmark_module
from optiml.task import load_task
from optiml.templates.kernels import template_kernels

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "tasks" / "softmax.py"


def render_digests() -> ModuleType:
    return benchmark_module("render_digests")


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


def test_written_sources_pair_up_by_task_and_configuration(tmp_path: Path) -> None:
    """--sources writes each rendered source once per (task, configuration); sass_compare pairs two such
    folders and keeps only pairs whose text differs, grouped by their tensor-core variants."""
    module = render_digests()
    for side in ("before", "after"):
        record = module.digest_task(str(ROOT / "tasks" / "matmul.py"), neighbours=False, keep_sources=True)
        assert set(record["sources"]) == set(record["renders"])
        module.write_sources(tmp_path / side, {"matmul.py": record})
        assert "sources" not in record  # the table keeps digests only
    manifest = json.loads((tmp_path / "after" / "manifest.json").read_text())
    first = next(iter(manifest["matmul.py"].values()))
    changed = tmp_path / "after" / first
    changed.write_text(changed.read_text() + "// changed\n")
    sass = benchmark_module("sass_compare")
    kinds = sass.differing_pairs(tmp_path / "before", tmp_path / "after")
    assert [pair[0] for pairs in kinds.values() for pair in pairs] == ["matmul.py"]
    assert sass.kind_of("tf32x3(bm=64) | block_row(threads=256) | tf32x3_tma(bm=64)") == "tf32x3 + tf32x3_tma"
    assert sass.kind_of("block_row(threads=256)") == "block_row"
    assert sass.spread(list(range(10)), 3) == [0, 4, 9] and sass.spread([1, 2], 5) == [1, 2]
