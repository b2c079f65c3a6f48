import importlib

import pytest

from binlog import kernel
from tests.mariadb import MariaDB


@pytest.fixture(params=["compiled", "python"])
def both_merge_loops(request, monkeypatch):
    """The test runs with the compiled merge loop (merger/_merge.pyx) and with the Python one
    (``pytestmark = pytest.mark.usefixtures("both_merge_loops")`` in a module)."""
    loop = importlib.import_module("merger.kway_merge")
    if request.param == "python":
        monkeypatch.setattr(loop, "merge_loop", None)
    elif not kernel.pure_python():
        assert loop.merge_loop is not None, "merger._merge is not built: pip install -e . with Cython"
    return request.param


@pytest.fixture
def mariadb(tmp_path):
    """A throwaway MariaDB (no binlog) on loopback, stopped after the test."""
    server = MariaDB.start(tmp_path / "mariadb")
    yield server
    server.stop()


@pytest.fixture
def mariadb_binlogged(tmp_path):
    """A throwaway MariaDB writing a ROW-format binlog (mysql-bin.NNNNNN in its datadir)."""
    server = MariaDB.start(tmp_path / "mariadb-binlog", log_bin=True)
    yield server
    server.stop()


def pytest_sessionfinish(session, exitstatus):
    """The MariaDB template datadir (~114 MB) goes at the end of the run (atexit does it too)."""
    from tests.mariadb import remove_template
    remove_template()
