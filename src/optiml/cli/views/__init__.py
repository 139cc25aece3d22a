"""Terminal presenters of the CLI: data from the library in, rich renderables or JSON out.

Domain packages return data; what a person reads in a terminal is drawn here.
"""
