"""OptiML: verified, fast CUDA kernels from what you want computed.

The package root imports nothing heavy: the GPU worker (`optiml.evaluate.worker`) must
stay importable with only the standard library, NumPy and PyTorch.
"""

__version__ = "0.1.0"
