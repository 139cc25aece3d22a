"""Terminal presenters of the CLI: data from the library in, rich renderables or JSON out.

Domain packages return data; what a person reads in a terminal is drawn here (and, in
:mod:`~optiml.cli.views.confirm`, what they answer to it is asked).
"""
