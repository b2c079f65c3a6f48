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
