"""The logical schema over SQL: the endpoint answers SHOW DATABASES /
TABLES / CREATE TABLE / COLUMNS / INDEX, DESC and SELECTs over information_schema from the meta store's
logical schema at the head of the served global binlog — by text protocol (PyMySQL), by a real driver's
server-side prepared statements (mysql-connector-python, ``cursor(prepared=True)``) and by raw
COM_STMT_PREPARE/EXECUTE; ``SHOW CREATE TABLE`` run on a fresh MariaDB makes a table whose
information_schema.COLUMNS equals ours; the connect-time statements of Debezium, Flink CDC, Canal and
Maxwell are answered; every statement that would change data is refused naming it; 1,000 fuzzed
COM_STMT_* / COM_QUERY packets leave the server answering."""

from __future__ import annotations

import json
import random
import re
import shutil
import struct
from pathlib import Path

import mysql.connector
import pymysql
import pytest

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.mariadb import MariaDB
from tests.test_server_support import PASSWORD, USER, USERS, RawClient

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
INFO_COLUMNS = ("COLUMN_NAME", "ORDINAL_POSITION", "COLUMN_DEFAULT", "IS_NULLABLE", "DATA_TYPE",
                "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION", "NUMERIC_SCALE",
                "DATETIME_PRECISION", "CHARACTER_SET_NAME", "COLLATION_NAME", "COLUMN_TYPE", "COLUMN_KEY")


def built(tmp_path_factory, name: str) -> Path:
    out = tmp_path_factory.mktemp(name) / "global"
    build(sorted(p for p in (ROOT / name).iterdir() if p.is_dir()), out, settings=Settings())
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return {name: built(tmp_path_factory, name) for name in ("ddl-3dn", "mixed-2dn", "bank-4dn")}


@pytest.fixture(scope="module")
def ddl_server(outputs):
    with start_in_thread(ServerConfig(dir=outputs["ddl-3dn"], users=USERS)) as h:
        yield h


def truth(name: str) -> dict:
    return json.loads((ROOT / name / "truth.json").read_text())


def connect(port: int, **kwargs) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, **kwargs)


def query(port: int, sql: str, *args) -> list[tuple]:
    with connect(port) as c, c.cursor() as cur:
        cur.execute(sql, args or None)
        return list(cur.fetchall())


# -- the schema, text protocol ---------------------------------------------------------------------------
def test_show_statements_describe_the_truths_final_logical_schema(ddl_server):
    t = truth("ddl-3dn")
    port = ddl_server.port
    dbs = sorted({v["db"] for v in t["tables"].values()})
    assert [r[0] for r in query(port, "SHOW DATABASES")] == ["information_schema", *dbs]
    for db in dbs:
        names = sorted(v["table"] for v in t["tables"].values() if v["db"] == db)
        assert [r[0] for r in query(port, f"SHOW TABLES FROM `{db}`")] == names
        assert query(port, f"SHOW FULL TABLES IN `{db}` where Table_Type = 'BASE TABLE'") == \
            [(n, "BASE TABLE") for n in names]
    for v in t["tables"].values():
        cols = query(port, f"SHOW COLUMNS FROM `{v['table']}` FROM `{v['db']}`")
        assert [c[0] for c in cols] == [c["name"] for c in v["columns"]]
        assert [c[1] for c in cols] == [c["type"] for c in v["columns"]]
        assert [c[2] for c in cols] == ["YES" if c["nullable"] else "NO" for c in v["columns"]]
        assert [c[4] for c in cols] == [None if c["default"] is None else str(c["default"]) for c in v["columns"]]
        assert [c[3] for c in cols if c[3] == "PRI"] == ["PRI"] and cols[[c[0] for c in cols].index(v["pk"])][3] == "PRI"
        assert query(port, f"DESC `{v['db']}`.`{v['table']}`") == [c[:6] for c in cols]
        create = query(port, f"SHOW CREATE TABLE `{v['db']}`.`{v['table']}`")[0]
        assert create[0] == v["table"] and create[1].startswith(f"CREATE TABLE `{v['table']}` (")
    # information_schema through SQLite: joins, aggregates, LIKE.
    rows = query(port, "SELECT c.TABLE_NAME, COUNT(*) FROM information_schema.COLUMNS c JOIN "
                       "information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
                       "WHERE c.TABLE_SCHEMA = 'ddl' GROUP BY c.TABLE_NAME ORDER BY c.TABLE_NAME")
    assert rows == sorted((v["table"], len(v["columns"])) for v in t["tables"].values() if v["db"] == "ddl")
    assert query(port, "SELECT column_name FROM information_schema.key_column_usage WHERE "
                       "constraint_name = 'PRIMARY' AND table_schema = %s AND table_name = %s", "ddl", "t1") == [("id",)]
    assert query(port, "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
                       "WHERE TABLE_NAME = 't1' ORDER BY INDEX_NAME") == [("idx_amount", "amount", 1), ("PRIMARY", "id", 0)]


def test_the_schema_is_the_one_at_the_head_of_the_served_binlog(tmp_path, outputs):
    """A directory whose file ends just before the ADD COLUMN of ddl.t1 answers the old columns; once the
    rest of the file is there, the new ones (the catalog follows the last CTS marker, not the meta store's
    newest entry)."""
    src = outputs["ddl-3dn"]
    name = "binlog.000001"
    events = read_all(src / name)
    alter = next(e for e in events if e.header.type_code == 2 and b"ADD COLUMN `c`" in bytes(e.raw))
    served = tmp_path / "served"
    served.mkdir()
    for f in ("binlog.index", "meta.db", "state.json"):
        shutil.copy(src / f, served / f)
    data = (src / name).read_bytes()
    (served / name).write_bytes(data[:alter.pos])
    with start_in_thread(ServerConfig(dir=served, users=USERS)) as h:
        before = [r[0] for r in query(h.port, "SHOW COLUMNS FROM ddl.t1")]
        (served / name).write_bytes(data)
        after = [r[0] for r in query(h.port, "SHOW COLUMNS FROM ddl.t1")]
    assert before == ["id", "name", "amount", "note"]
    assert after[:3] == ["id", "name", "c"]


# -- prepared statements ---------------------------------------------------------------------------------
COLUMNS_QUERY = ("SELECT COLUMN_NAME, COLUMN_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA=? AND "
                 "TABLE_NAME=? ORDER BY ORDINAL_POSITION")


def test_a_driver_with_server_side_prepared_statements_gets_the_logical_columns(ddl_server):
    """mysql-connector-python (Oracle's driver, default settings, pure-Python protocol) with
    ``cursor(prepared=True)``: COM_STMT_PREPARE + COM_STMT_EXECUTE with binary rows."""
    t = truth("ddl-3dn")
    conn = mysql.connector.connect(host="127.0.0.1", port=ddl_server.port, user=USER, password=PASSWORD,
                                   use_pure=True)
    try:
        cur = conn.cursor(prepared=True)
        for v in t["tables"].values():
            cur.execute(COLUMNS_QUERY, (v["db"], v["table"]))
            assert cur.fetchall() == [(c["name"], c["type"]) for c in v["columns"]]
        cur.execute("SELECT ORDINAL_POSITION, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_NAME = ? "
                    "ORDER BY ORDINAL_POSITION", ("t1",))
        assert cur.fetchall() == [(1, "NO"), (2, "YES"), (3, "YES"), (4, "NO")]
        cur.execute("SHOW CREATE TABLE ddl.t1")
        assert cur.fetchall()[0][1].startswith("CREATE TABLE `t1`")
        # Debezium's prepared GTID_SUBTRACT(?, ?) of the server's set and its own
        plain0 = conn.cursor()
        plain0.execute("SELECT @@gtid_executed")
        executed = plain0.fetchall()[0][0]
        uuid, last = executed.split(":")[0], int(executed.rsplit("-", 1)[1])
        cur.execute("SELECT GTID_SUBTRACT(?, ?)", (executed, f"{uuid}:1-100"))
        assert cur.fetchall() == [(f"{uuid}:101-{last}",)]
        with pytest.raises(mysql.connector.Error) as info:
            cur.execute("UPDATE ddl.t1 SET amount = ? WHERE id = ?", (1, 2))
        assert info.value.errno == 1290 and "UPDATE is refused" in info.value.msg
        plain = conn.cursor()
        plain.execute("SELECT @@version_comment, DATABASE()")
        assert plain.fetchall() == [("gbinlog replication endpoint", None)]
    finally:
        conn.close()


def stmt_prepare(client: RawClient, sql: str) -> tuple[int, int, int, list[bytes]]:
    client.seq = 0
    client.write_packet(b"\x16" + sql.encode())
    first = client.read_packet()
    assert first[0] == 0, first
    stmt_id, n_cols, n_params = struct.unpack_from("<IHH", first, 1)
    defs = []
    for count in (n_params, n_cols):
        if count:
            defs += [client.read_packet() for _ in range(count)]
            assert client.read_packet()[0] == 0xFE
    return stmt_id, n_cols, n_params, defs


def lenenc_str(data: bytes, off: int) -> tuple[bytes, int]:
    n = data[off]
    return data[off + 1:off + 1 + n], off + 1 + n


def test_raw_com_stmt_prepare_execute_close_with_binary_rows(ddl_server):
    client = RawClient(ddl_server.port)
    stmt_id, n_cols, n_params, _ = stmt_prepare(client, COLUMNS_QUERY)
    assert (n_cols, n_params) == (2, 2)
    params = [b"ddl", "客户".encode()]
    body = struct.pack("<IBI", stmt_id, 0, 1) + b"\x00" + b"\x01" + b"\xfd\x00" * 2 + b"".join(
        bytes([len(v)]) + v for v in params)
    client.seq = 0
    client.write_packet(b"\x17" + body)
    assert client.read_packet() == b"\x02"
    col_types = [client.read_packet() for _ in range(2)]
    assert [d[-6] for d in col_types] == [0xFD, 0xFD]  # VAR_STRING
    assert client.read_packet()[0] == 0xFE
    rows = []
    while (pkt := client.read_packet())[0] != 0xFE:
        assert pkt[0] == 0 and pkt[1] == 0   # binary row header, no NULLs
        name, off = lenenc_str(pkt, 2)
        ctype, off = lenenc_str(pkt, off)
        rows.append((name.decode(), ctype.decode()))
    assert rows == [("id", "bigint"), ("名字", "varchar(30)"), ("等级", "int")]
    # Integer columns come back as 8-byte integers in the binary row.
    stmt2, _, _, _ = stmt_prepare(client, "SELECT ORDINAL_POSITION FROM information_schema.COLUMNS WHERE "
                                          "TABLE_NAME = 't1' ORDER BY 1")
    client.seq = 0
    client.write_packet(b"\x17" + struct.pack("<IBI", stmt2, 0, 1))
    assert client.read_packet() == b"\x01"
    client.read_packet(), client.read_packet()
    got = []
    while (pkt := client.read_packet())[0] != 0xFE:
        got.append(struct.unpack_from("<q", pkt, 2)[0])
    assert got == [1, 2, 3, 4]
    # CLOSE has no answer; the closed id is then unknown.
    client.seq = 0
    client.write_packet(b"\x19" + struct.pack("<I", stmt_id))
    client.seq = 0
    client.write_packet(b"\x17" + struct.pack("<IBI", stmt_id, 0, 1))
    err = client.read_packet()
    assert err[0] == 0xFF and struct.unpack_from("<H", err, 1)[0] == 1243
    client.sock.close()


# -- SHOW CREATE TABLE on a real MariaDB -----------------------------------------------------------------
@pytest.fixture(scope="module")
def fresh_mariadb(tmp_path_factory):
    server = MariaDB.start(tmp_path_factory.mktemp("fresh"))
    yield server
    server.stop()


def _mariadb_normal(row: dict) -> tuple:
    """MariaDB's information_schema forms → MySQL 8's: no integer display widths, COLUMN_DEFAULT unquoted
    and SQL NULL when there is none."""
    row = dict(row)
    row["COLUMN_TYPE"] = re.sub(r"^(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)", r"\1", row["COLUMN_TYPE"])
    default = row["COLUMN_DEFAULT"]
    if default == "NULL":
        default = None
    elif default is not None and default.startswith("'") and default.endswith("'"):
        default = default[1:-1].replace("''", "'")
    row["COLUMN_DEFAULT"] = default
    return tuple(row[c] for c in INFO_COLUMNS)


@pytest.mark.parametrize("name", ["ddl-3dn", "mixed-2dn", "bank-4dn"])
def test_show_create_table_on_a_fresh_mariadb_gives_our_information_schema_columns(outputs, fresh_mariadb, name):
    t = truth(name)
    with start_in_thread(ServerConfig(dir=outputs[name], users=USERS)) as h, connect(h.port) as ours:
        cur = ours.cursor(pymysql.cursors.DictCursor)
        for v in t["tables"].values():
            cur.execute(f"SHOW CREATE TABLE `{v['db']}`.`{v['table']}`")
            create = cur.fetchone()["Create Table"]
            scratch = f"fresh_{abs(hash((name, v['db']))) % 10**6}"
            fresh_mariadb.query(f"CREATE DATABASE IF NOT EXISTS `{scratch}`")
            fresh_mariadb.query(f"DROP TABLE IF EXISTS `{scratch}`.`{v['table']}`")
            fresh_mariadb.run_sql(f"USE `{scratch}`;\n{create};\n")
            cols = ", ".join(INFO_COLUMNS)
            with fresh_mariadb.connect() as real, real.cursor(pymysql.cursors.DictCursor) as rc:
                rc.execute(f"SELECT {cols} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
                           "ORDER BY ORDINAL_POSITION", (scratch, v["table"]))
                theirs = [_mariadb_normal(r) for r in rc.fetchall()]
            cur.execute(f"SELECT {cols} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
                        "ORDER BY ORDINAL_POSITION", (v["db"], v["table"]))
            mine = [tuple(r[c] for c in INFO_COLUMNS) for r in cur.fetchall()]
            assert mine == theirs, (v["db"], v["table"])
            assert [r[0] for r in mine] == [c["name"] for c in v["columns"]]


# -- connect-time statements of CDC tools -----------------------------------------------------------------
# (statement, expected first row or None for "an OK / any result set"), as each tool sends them.
CONNECT_STATEMENTS = [
    # Debezium (MySqlConnection / BinlogConnectorConnection)
    ("SET autocommit=0", None),
    ("SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'", ("gtid_mode", "ON")),
    ("SHOW GLOBAL VARIABLES LIKE 'binlog_format'", ("binlog_format", "ROW")),
    ("SHOW GLOBAL VARIABLES LIKE 'binlog_row_image'", ("binlog_row_image", "FULL")),
    ("SHOW VARIABLES WHERE Variable_name IN ('character_set_server','collation_server')",
     ("character_set_server", "utf8mb4")),
    # MySQL 5.7's default (the configured version here is 5.7.44)
    ("SHOW VARIABLES WHERE Variable_name = 'sql_mode'",
     ("sql_mode", "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                  "NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION")),
    ("SHOW SESSION STATUS LIKE 'Ssl_version'", None),
    ("SHOW GRANTS FOR CURRENT_USER", None),
    ("SHOW MASTER STATUS", None),
    ("SHOW BINARY LOGS", None),
    ("SELECT @@global.gtid_purged", None),
    ("SHOW DATABASES", ("information_schema",)),
    ("SELECT schema_name, default_character_set_name, default_collation_name FROM information_schema.schemata",
     None),
    ("SHOW FULL TABLES IN `ddl` where Table_Type = 'BASE TABLE'", ("t1", "BASE TABLE")),
    ("USE `ddl`", None),
    ("SHOW TABLE STATUS LIKE 't1'", None),
    ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", None),
    ("START TRANSACTION WITH CONSISTENT SNAPSHOT", None),
    ("SHOW CREATE TABLE `ddl`.`t1`", None),
    ("UNLOCK TABLES", None),
    ("COMMIT", None),
    # Flink CDC (MySqlValidator, DebeziumUtils)
    ("SELECT VERSION()", ("5.7.44-log",)),
    ("SHOW VARIABLES LIKE 'server_id'", ("server_id", "1")),
    ("SELECT @@global.time_zone", None),
    # Canal (MysqlConnection.updateSettings / loadBinlog*)
    ("set wait_timeout=9999999", None),
    ("set net_write_timeout=7200", None),
    ("set net_read_timeout=7200", None),
    ("set names 'binary'", None),
    ("set @master_binlog_checksum= @@global.binlog_checksum", None),
    ("set @slave_uuid=uuid()", None),
    ("SET @mariadb_slave_capability='4'", None),
    ("SET @master_heartbeat_period=15000000000", None),
    ("select @@global.binlog_checksum", ("CRC32",)),
    ("show variables like 'binlog_format'", ("binlog_format", "ROW")),
    ("select @@version_comment limit 1", ("gbinlog replication endpoint",)),
    ("desc `ddl`.`t1`", ("id", "bigint", "NO", "PRI", None, "")),
    # Maxwell (MaxwellMysqlStatus, SchemaCapturer)
    ("SHOW VARIABLES LIKE 'log_bin'", ("log_bin", "ON")),
    ("SELECT @@server_id as server_id", (1,)),
    ("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.SCHEMATA", None),
    ("SELECT TABLES.TABLE_NAME, CCSA.CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.TABLES JOIN "
     "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY AS CCSA ON TABLES.TABLE_COLLATION = "
     "CCSA.COLLATION_NAME WHERE TABLES.TABLE_SCHEMA = 'ddl' ORDER BY 1", ("t1", "utf8mb4")),
    ("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, ORDINAL_POSITION, COLUMN_TYPE, "
     "DATETIME_PRECISION, COLUMN_KEY FROM `information_schema`.`COLUMNS` WHERE TABLE_SCHEMA = 'ddl' "
     "ORDER BY TABLE_NAME, ORDINAL_POSITION", ("t1", "id", "bigint", None, 1, "bigint", None, "PRI")),
    ("SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_NAME = 'PRIMARY' "
     "AND TABLE_SCHEMA = 'ddl' ORDER BY TABLE_NAME, ORDINAL_POSITION", ("t1", "id")),
    ("SHOW VARIABLES LIKE 'lower_case%'", ("lower_case_file_system", "OFF")),
    ("SELECT @@gtid_mode, @@enforce_gtid_consistency", None),
    ("SHOW WARNINGS", None),
]


def test_the_connect_time_statements_of_cdc_tools_are_answered(ddl_server):
    with connect(ddl_server.port) as c, c.cursor() as cur:
        for sql, first in CONNECT_STATEMENTS:
            cur.execute(sql)
            rows = cur.fetchall()
            if first is not None:
                assert rows and rows[0] == first, (sql, rows[:2])


REFUSED = ["INSERT INTO ddl.t1 VALUES (1, 'a', 'x', 0)", "UPDATE ddl.t1 SET amount = 1", "DELETE FROM ddl.t1",
           "REPLACE INTO ddl.t1 VALUES (1)", "CREATE TABLE ddl.x (id int)", "DROP TABLE ddl.t1",
           "ALTER TABLE ddl.t1 ADD COLUMN z int", "TRUNCATE TABLE ddl.t1", "RENAME TABLE ddl.t1 TO ddl.t9",
           "CREATE DATABASE x", "DROP DATABASE ddl", "GRANT ALL ON *.* TO x", "LOAD DATA INFILE 'f' INTO TABLE t1",
           "FLUSH PRIVILEGES", "LOCK TABLES ddl.t1 WRITE", "CALL p()", "RESET MASTER",
           "CHANGE MASTER TO MASTER_HOST='x'", "XA START 'x'", "OPTIMIZE TABLE ddl.t1"]


def test_every_statement_that_would_change_data_is_refused_naming_it(ddl_server):
    with connect(ddl_server.port) as c, c.cursor() as cur:
        for sql in REFUSED:
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(sql)
            code, message = info.value.args
            words = sql.split()
            named = " ".join(words[:2] if words[0] in ("CREATE", "DROP", "ALTER", "LOCK", "FLUSH", "LOAD", "RESET",
                                                       "CHANGE") else words[:1])
            assert (code, message.split(" is refused")[0]) == (1290, named), sql
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_reading_table_data_or_unknown_tables_is_a_clear_error(ddl_server):
    with connect(ddl_server.port) as c, c.cursor() as cur:
        for sql, code in [("SELECT * FROM ddl.t1", 1142), ("SELECT * FROM nope.t", 1146),
                          ("SHOW CREATE TABLE ddl.nope", 1146), ("SHOW TABLES FROM nope", 1049),
                          ("USE nope", 1049), ("SHOW TABLES", 1046), ("SELECT * FROM information_schema.nope", 1146)]:
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(sql)
            assert info.value.args[0] == code, sql


# -- fuzz -------------------------------------------------------------------------------------------------
def read_reply(client: RawClient) -> str:
    """One whole reply: 'ok', 'err' or 'rs' (a result set read to its final EOF)."""
    first = client.read_packet()
    if first[0] == 0x00:
        return "ok"
    if first[0] == 0xFF:
        return "err"
    assert first[0] not in (0xFE,), first
    n = first[0]
    for _ in range(n):
        client.read_packet()
    assert client.read_packet()[0] == 0xFE
    while client.read_packet()[0] != 0xFE:
        pass
    return "rs"


def read_prepare_reply(client: RawClient) -> str:
    first = client.read_packet()
    if first[0] == 0xFF:
        return "err"
    assert first[0] == 0 and len(first) == 12, first
    _, n_cols, n_params = struct.unpack_from("<IHH", first, 1)
    for count in (n_params, n_cols):
        if count:
            for _ in range(count):
                client.read_packet()
            assert client.read_packet()[0] == 0xFE
    return "prepared"


SEEDS = ["SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = ?", "SHOW TABLES FROM ddl",
         "SELECT @@version", "SHOW CREATE TABLE ddl.t1", "SET @a = ?", "DESC ddl.t1", "SELECT ?, ?",
         "SHOW VARIABLES WHERE Variable_name LIKE ?", "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA=?"]


@pytest.mark.slow
def test_1000_fuzzed_stmt_and_query_packets_get_ok_err_or_a_result_set(ddl_server):
    rng = random.Random(15)
    client = RawClient(ddl_server.port)
    kinds: dict[str, int] = {}
    ids = [0]
    for _ in range(1000):
        choice = rng.random()
        client.seq = 0
        if choice < 0.25:  # COM_QUERY: a seed mutated
            sql = bytearray(rng.choice(SEEDS).replace("?", "'x'").encode())
            for _ in range(rng.randrange(4)):
                sql[rng.randrange(len(sql))] = rng.randrange(256)
            client.write_packet(b"\x03" + bytes(sql))
            got = read_reply(client)
        elif choice < 0.45:  # COM_STMT_PREPARE, mutated or not
            sql = bytearray(rng.choice(SEEDS).encode())
            if rng.random() < 0.5:
                sql[rng.randrange(len(sql))] = rng.randrange(256)
            client.write_packet(b"\x16" + bytes(sql))
            got = read_prepare_reply(client)
            ids.append(max(ids) + 1)
        elif choice < 0.8:  # COM_STMT_EXECUTE: a known or random id, random parameter bytes
            stmt = rng.choice(ids) if rng.random() < 0.8 else rng.randrange(1 << 32)
            body = struct.pack("<IBI", stmt, rng.randrange(4), 1) + rng.randbytes(rng.randrange(40))
            client.write_packet(b"\x17" + body[:rng.randrange(len(body) + 1)])
            got = read_reply(client)
        elif choice < 0.9:  # RESET / FETCH answer; SEND_LONG_DATA / CLOSE do not: a PING must still answer
            cmd = rng.choice([0x1A, 0x1C, 0x18, 0x19])
            client.write_packet(bytes([cmd]) + rng.randbytes(rng.randrange(12)))
            if cmd in (0x18, 0x19):
                client.seq = 0
                client.write_packet(b"\x0e")
            got = read_reply(client)
        else:  # other commands with junk
            client.write_packet(bytes([rng.choice([0x02, 0x04, 0x0E, 0x1F, 0x30])]) + rng.randbytes(8))
            got = read_reply(client)
        kinds[got] = kinds.get(got, 0) + 1
    assert sum(kinds.values()) == 1000
    assert kinds.get("err", 0) > 100 and kinds.get("rs", 0) > 50 and kinds.get("prepared", 0) > 50
    client.seq = 0
    client.write_packet(b"\x03SHOW DATABASES")
    assert read_reply(client) == "rs"
    client.sock.close()
    assert query(ddl_server.port, "SELECT 1") == [(1,)]
