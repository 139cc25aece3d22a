"""Why generation could not produce what was asked.

::

    OptimlError
    └── GenerationError     no LLM configured, an empty request, an output file in the way,
                            a task the model could not get right, a generation with no verified kernel

A candidate kernel that fails is *not* an exception: it is an :class:`~optiml.generate.outcome.Attempt`
with its status, and the thought moves on to a repair.
"""

from __future__ import annotations

from optiml.errors import OptimlError


class GenerationError(OptimlError):
    pass
