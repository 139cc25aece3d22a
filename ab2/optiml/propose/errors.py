"""Why an edit could not be parsed or applied.

::

    OptimlError
    └── EditError            an edit cannot be used (raised by apply_edit and the parsers)
        ├── EditParseError   the text is not a usable edit (no blocks, an unclosed block, …)
        └── EditApplyError   the edit does not fit the kernel (SEARCH text not found, unknown knob, …)

Proposers turn these into a :class:`optiml.propose.base.Proposal` with ``error`` set (after one
retry for an LLM); code that replays a recorded edit chain sees them as exceptions.
"""

from __future__ import annotations

from optiml.errors import OptimlError


class EditError(OptimlError):
    pass


class EditParseError(EditError):
    pass


class EditApplyError(EditError):
    pass
