"""The ``optiml`` command line. Thin: parse, call the library, render; errors become one red line.

``app`` lives in :mod:`optiml.cli.app`; importing the command modules registers their commands.
"""

from optiml.cli import bench, core, generate, report, search  # noqa: F401  (registers the commands)
from optiml.cli.app import app, main

__all__ = ["app", "main"]
