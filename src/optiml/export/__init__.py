"""Exports of a verified kernel: a KernelBench ``ModelNew`` file, or the ``.cu`` with its flags."""
