"""benchmarks/tf32_rounding_probe.py: its TF32 roundings bit for bit, and one probe row on the CPU."""

from __future__ import annotations

import torch

from benchmark_scripts import benchmark_module

probe_script = benchmark_module("tf32_rounding_probe")


def test_rounding_to_nearest_breaks_ties_away_from_zero_and_truncation_drops_the_low_bits() -> None:
    ulp = 2.0**-10  # TF32's last place at 1.0
    x = torch.tensor([1 + ulp / 2, 1 + ulp / 4, -(1 + ulp / 2), 1 + 3 * ulp / 4, 3.0, 0.0])
    assert probe_script.round_nearest(x).tolist() == [1 + ulp, 1.0, -(1 + ulp), 1 + ulp, 3.0, 0.0]
    assert probe_script.truncate(x).tolist() == [1.0, 1.0, -1.0, 1.0, 3.0, 0.0]
    values = torch.randn(10_000)
    for rounded in (probe_script.round_nearest(values), probe_script.truncate(values)):
        assert (rounded.view(torch.int32) & 0x1FFF).eq(0).all()  # TF32-representable
        assert ((rounded - values).abs() <= values.abs() * 2.0**-10).all()  # within one TF32 place


def test_a_probe_row_on_the_cpu_where_every_setting_is_exact_fp32() -> None:
    make = lambda: torch.nn.Conv2d(8, 4, 3, padding=1)  # noqa: E731
    row = probe_script.probe("small", make, (2, 8, 10, 10), "cpu")
    assert row["default_again"] == {"max_abs_diff": 0.0, "passes_1e-4": True}
    assert row["exact"]["max_abs_diff"] < 1e-6  # the CPU has no TF32: "default" is exact there
    assert 0.0 < row["rna"]["max_abs_diff"] < 1e-2 and 0.0 < row["truncate"]["max_abs_diff"] < 1e-2
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default is left as found
