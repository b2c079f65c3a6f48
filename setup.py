"""Compiled kernels (everything else is in pyproject.toml). ``optional``: without a C compiler the
install still works and the pure-Python loops run instead (same bytes, slower)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("dumper.server._framing", ["dumper/server/_framing.c"], optional=True),
])
