"""The optional compiled kernels: ``binlog._kernel`` (Cython: the build's per-DN scan and
transaction framing), ``extractor._sort`` (Cython: the Sorter and vtso text), ``merger._merge`` (Cython: the merge loop),
``gbinlog.spark_engine._xkernel`` (Cython: the Spark engine's exchange codec and range placement),
``dumper.server._framing`` (C: the dump's packet framing) and ``binlog._wire`` (C: the live DN
client's unframing). Each is built when a C compiler (and Cython) is there and skipped with a
warning otherwise; the pure-Python twins then run and give the same bytes. Everything else is
declared in pyproject.toml."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed compile is a warning, not a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/toolchain failure
            self.warn(f"compiled kernels not built ({exc}); the pure-Python ones are used")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self.warn(f"{ext.name} not built ({exc}); its pure-Python twin is used")


# The kernels' optimisation: -O2 for every real build; a throwaway build that only checks the wheel
# installs and runs (tests/test_wheel.py) may ask for -O0, which compiles in a fraction of the time.
OPT = os.environ.get("GBINLOG_KERNEL_CFLAGS", "-O2 -g0").split()


def extensions() -> list:
    framing = [Extension("dumper.server._framing", ["dumper/server/_framing.c"], extra_compile_args=OPT),
               Extension("binlog._wire", ["binlog/_wire.c"], extra_compile_args=OPT)]
    try:
        from Cython.Build import cythonize
    except ImportError:
        return framing
    crc = {"include_dirs": ["binlog"], "depends": ["binlog/gb_crc32.h", "binlog/gb_find.h"], "libraries": ["z"]}
    return framing + cythonize([Extension("binlog._kernel", ["binlog/_kernel.pyx"], extra_compile_args=OPT,
                                          **crc),
                                Extension("gbinlog.spark_engine._xkernel", ["gbinlog/spark_engine/_xkernel.pyx"],
                                          extra_compile_args=OPT, **crc),
                                Extension("extractor._sort", ["extractor/_sort.pyx"], extra_compile_args=OPT),
                                Extension("merger._merge", ["merger/_merge.pyx"], extra_compile_args=OPT)],
                               language_level=3, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
