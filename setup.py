"""The optional compiled kernel (``binlog._kernel``, Cython): built when Cython and a C compiler
are there, skipped with a warning otherwise — ``binlog.kernel`` then uses the pure-Python one.
Everything else is declared in pyproject.toml."""

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed compile is a warning, not a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/toolchain failure
            self.warn(f"binlog._kernel not built ({exc}); the pure-Python kernel is used")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self.warn(f"{ext.name} not built ({exc}); the pure-Python kernel is used")


def extensions() -> list:
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    from setuptools import Extension

    return cythonize([Extension("binlog._kernel", ["binlog/_kernel.pyx"], libraries=["z"],
                                extra_compile_args=["-O2", "-g0"])], language_level=3, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
