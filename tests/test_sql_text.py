"""A query's comments and statements as MySQL reads them (``dumper.server.sqltext``): the rules of
the MySQL manual's "Comments" section, each case with the text a MySQL 8.0.36 server executes."""

from __future__ import annotations

import pytest

from dumper.server.sqltext import UnclosedComment, split_statements, version_number

V8 = version_number("8.0.36-log")


@pytest.mark.parametrize(("sql", "want"), [
    ("SELECT 1", ["SELECT 1"]),
    ("/* mysql-connector-j-9.1.0 (Revision: 3f3c9a9d) */SELECT  @@license", ["SELECT  @@license"]),
    ("SELECT 1 /* in the middle */ + 1", ["SELECT 1   + 1"]),
    ("-- a line comment\nSELECT 1", ["SELECT 1"]),
    ("SELECT 1 -- trailing", ["SELECT 1"]),
    ("SELECT 1--1", ["SELECT 1--1"]),                 # no space after --: minus minus one, not a comment
    ("SELECT 1 --\tx\n+ 2", ["SELECT 1 \n+ 2"]),      # a control character after -- starts a comment
    ("# hash comment\nSELECT 2 # and another", ["SELECT 2"]),
    ("/*!40101 SET NAMES utf8 */", ["SET NAMES utf8"]),
    ("/*!SET NAMES utf8*/", ["SET NAMES utf8"]),
    ("SELECT 1 /*!80036 + 1 */", ["SELECT 1  + 1"]),
    ("SELECT 1 /*!80037 + 1 */", ["SELECT 1"]),       # written for a later version: skipped
    ("SELECT 1 /*M!100100 + 1 */", ["SELECT 1"]),     # MariaDB-only executable comment
    ("SELECT /*+ MAX_EXECUTION_TIME(1000) */ 1", ["SELECT   1"]),
    ("SELECT 'a;b', \"c/*d*/\", `e#f`, 'it''s -- x'", ["SELECT 'a;b', \"c/*d*/\", `e#f`, 'it''s -- x'"]),
    ("SELECT 'a\\'; --' ; SELECT 2", ["SELECT 'a\\'; --'", "SELECT 2"]),
    ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
    ("SELECT 1;;  ; ", ["SELECT 1"]),
    ("/* only a comment */", []),
    ("  ;  ", []),
])
def test_statements_as_mysql_reads_them(sql, want):
    assert split_statements(sql, V8) == want


def test_a_versioned_comment_is_read_by_its_own_version_and_later_only():
    sql = "SELECT 1 /*!50711 + 10 */"
    assert split_statements(sql, version_number("5.7.11")) == ["SELECT 1  + 10"]
    assert split_statements(sql, version_number("5.7.10-log")) == ["SELECT 1"]


def test_an_unclosed_comment_is_an_error():
    with pytest.raises(UnclosedComment):
        split_statements("SELECT 1 /* never closed", V8)


def test_version_numbers():
    assert version_number("8.0.36-log") == 80036
    assert version_number("5.7.44-log") == 50744
    assert version_number("10.11.6-MariaDB") == 101106
