"""Exports of a verified kernel (``optiml export --as``): a KernelBench ``ModelNew`` file, a Python file
registering a ``torch.library`` custom op, or a standalone ``.cu`` with ``main()`` and a recorded case.
See docs/export.md."""
