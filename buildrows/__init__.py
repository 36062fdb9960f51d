"""buildrows: declarative build rows for Python wheels with a C++/CUDA core."""

__version__ = "0.1.0"
