"""Typed errors across the Spark task boundary.

A task that hits bad input raises a typed error (``OrderingError``, ``BinlogError``, ``ShapeError``,
``DumperError``, …) naming the DN, file and offset; Spark hands the driver a Java exception holding
the Python traceback as text. ``in_task`` wraps task code so the error travels as one marked line
(class + message + attributes); ``reraise`` finds that line in the driver and raises the same class
with the same message, so ``--engine spark`` fails exactly like ``--engine local``.
"""

from __future__ import annotations

import base64
import gc
import importlib
import json
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

_MARK = "GBINLOG-TASK-ERROR:"
_FOUND = re.compile(re.escape(_MARK) + r"([A-Za-z0-9+/=]+)")
T = TypeVar("T")


class SparkTaskError(RuntimeError):
    """A Spark job failed for a reason that is not one of the pipeline's typed errors."""


def _encode(exc: BaseException) -> str:
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, (str, int, float, bool, type(None)))}
    doc = {"module": type(exc).__module__, "name": type(exc).__qualname__, "text": str(exc), "attrs": attrs}
    return _MARK + base64.b64encode(json.dumps(doc).encode()).decode()


def in_task(fn: Callable[..., Iterator[T]]) -> Callable[..., Iterator[T]]:
    """Decorate a task generator: any exception leaves it as ``RuntimeError(<marked line>)``.

    The cyclic garbage collector is off while the task runs: a task builds hundreds of thousands
    of acyclic objects (events, blocks, transactions), and gen-2 passes over them cost 2× the
    decoding itself; reference counting frees them all the same."""
    def wrapper(*args, **kwargs) -> Iterator[T]:
        was = gc.isenabled()
        gc.disable()
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:
            raise RuntimeError(_encode(exc)) from exc
        finally:
            if was:
                gc.enable()
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


def decode(text: str) -> BaseException | None:
    """The typed error marked in ``text`` (a Spark exception's message), or None."""
    m = _FOUND.search(text)
    if m is None:
        return None
    doc = json.loads(base64.b64decode(m.group(1)))
    try:
        cls = getattr(importlib.import_module(doc["module"]), doc["name"])
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise TypeError(doc["name"])
    except (ImportError, AttributeError, TypeError):
        return SparkTaskError(f"{doc['name']}: {doc['text']}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, doc["text"])
    for key, value in doc["attrs"].items():
        try:
            setattr(exc, key, value)
        except AttributeError:
            pass
    return exc


def reraise(exc: BaseException) -> None:
    """Raise the typed error a failed Spark job carries, else a ``SparkTaskError`` with its text."""
    found = decode(str(exc))
    if found is not None:
        raise found from None
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    raise SparkTaskError(f"Spark job failed: {first}") from exc
