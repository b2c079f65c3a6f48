import pytest

from tests.mariadb import MariaDB


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
