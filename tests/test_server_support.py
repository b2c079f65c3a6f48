"""Helpers for the replication endpoint tests (no tests here): a raw protocol client that checks every
byte it receives, a binlog written with BinlogWriter whose row values are known, replica helpers."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from binlog import BinlogWriter, EventType
from binlog.columns import Column, blob_column, varchar_column
from binlog.constants import ColumnType as T
from binlog.events import encode_body
from binlog.query_status import status_vars
from binlog.rows_events import encode_rows_event
from binlog.table_map import encode_table_map

USER, PASSWORD = "repl", "s3cret-pw"
ADMIN, ADMIN_PASSWORD = "boss", "adm1n"
USERS = {USER: PASSWORD, ADMIN: ADMIN_PASSWORD}


# -- a raw client -------------------------------------------------------------------------------------

class ServerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


def _err(payload: bytes) -> ServerError:
    code = struct.unpack_from("<H", payload, 1)[0]
    return ServerError(code, payload[9:].decode("utf-8", "replace"))


class RawClient:
    """Speaks the protocol itself (no PyMySQL), so tests see packets, sequence ids and splits as sent."""

    def __init__(self, port: int, user: str = USER, password: str = PASSWORD, *, timeout: float = 20) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.seq = 0
        hs = self.read_packet()
        assert hs[0] == 10, hs[:1]
        end = hs.index(b"\0", 1)
        self.server_version = hs[1:end].decode()
        off = end + 1 + 4
        scramble = hs[off:off + 8]
        off += 8 + 1
        caps_lo, _charset, self.status, caps_hi, _alen = struct.unpack_from("<HBHHB", hs, off)
        self.server_caps = caps_lo | caps_hi << 16
        off += 8 + 10
        scramble += hs[off:off + 12]
        auth = b""
        if password:
            h1 = hashlib.sha1(password.encode()).digest()
            h2 = hashlib.sha1(h1).digest()
            mask = hashlib.sha1(scramble + h2).digest()
            auth = bytes(a ^ b for a, b in zip(h1, mask, strict=True))
        caps = 0x200 | 0x8000 | 0x80000 | 0x1  # PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD
        resp = (struct.pack("<IIB", caps, 1 << 24, 33) + b"\0" * 23 + user.encode() + b"\0"
                + bytes([len(auth)]) + auth + b"mysql_native_password\0")
        self.write_packet(resp)
        reply = self.read_packet()
        if reply[0] == 0xFF:
            self.sock.close()
            raise _err(reply)
        assert reply[0] == 0, reply

    def write_packet(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack("<I", len(payload) | (self.seq << 24)) + payload)
        self.seq = (self.seq + 1) & 0xFF

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return bytes(buf)

    def read_packet(self) -> bytes:
        """One logical packet; continuation packets (16 MiB - 1 each) are joined, seq ids checked."""
        parts = []
        while True:
            word = struct.unpack("<I", self._recv(4))[0]
            n, seq = word & 0xFFFFFF, word >> 24
            assert seq == self.seq, f"sequence id {seq}, expected {self.seq}"
            self.seq = (seq + 1) & 0xFF
            parts.append(self._recv(n))
            if n < 0xFFFFFF:
                return b"".join(parts)

    def command(self, payload: bytes) -> None:
        self.seq = 0
        self.write_packet(payload)

    def query(self, sql: str) -> list[list[bytes | None]] | None:
        """Rows of a result set, or None for OK; ERR raises ServerError."""
        self.command(b"\x03" + sql.encode())
        first = self.read_packet()
        if first[0] == 0xFF:
            raise _err(first)
        if first[0] == 0:
            return None
        ncols = first[0]
        for _ in range(ncols):
            self.read_packet()
        assert self.read_packet()[0] == 0xFE
        rows = []
        while True:
            pkt = self.read_packet()
            if pkt[0] == 0xFE and len(pkt) < 9:
                return rows
            row, off = [], 0
            while off < len(pkt):
                if pkt[off] == 0xFB:
                    row.append(None)
                    off += 1
                    continue
                n = pkt[off]
                off += 1
                if n == 0xFC:
                    n = struct.unpack_from("<H", pkt, off)[0]
                    off += 2
                row.append(pkt[off:off + n])
                off += n
            rows.append(row)

    def dump(self, file: str, pos: int = 4, *, flags: int = 1, server_id: int = 99):
        """COM_BINLOG_DUMP; yields each event's bytes (without the 0x00) until EOF; ERR raises."""
        self.command(b"\x12" + struct.pack("<IHI", pos, flags, server_id) + file.encode())
        while True:
            pkt = self.read_packet()
            if pkt[0] == 0xFF:
                raise _err(pkt)
            if pkt[0] == 0xFE and len(pkt) < 8:
                return
            assert pkt[0] == 0, pkt[:8]
            yield pkt[1:]

    def close(self) -> None:
        self.sock.close()


def header(event: bytes) -> tuple:
    """(timestamp, type, server_id, size, log_pos, flags)."""
    return struct.unpack_from("<IBIIIH", event)


# -- a binlog with known rows -------------------------------------------------------------------------

TABLE_COLUMNS = [
    Column(T.LONG, 0, name="id"),
    varchar_column(256, name="v", charset=45),
    Column(T.LONGLONG, 0, name="n"),
    blob_column(4, name="b", charset=63),  # MySQL gives BLOBs the binary charset in the metadata
]
CREATE_TABLE = ("CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v VARCHAR(64), n BIGINT, b LONGBLOB) "
                "DEFAULT CHARSET=utf8mb4")


@dataclass
class SampleBinlog:
    """What was written: per file, the expected rows changes in order, and the final table."""

    dir: Path
    files: list[str]
    changes: list[tuple[str, list]] = field(default_factory=list)   # (kind, values) per row change
    final: dict[int, tuple] = field(default_factory=dict)


def write_sample_binlog(directory: Path, *, txns: int = 60, files: int = 3, big_event: int = 0,
                        pad: int = 0, seed: int = 7, db: str = "sample") -> SampleBinlog:
    """A MySQL 5.7-style binlog (CRC32, FDE 5.7.44-log) with DDL and row txns over ``files`` files.

    ``big_event`` > 0 adds one txn whose row holds a blob of that many bytes (for packet splitting);
    ``pad`` makes every inserted row's blob that long (big files of ordinary events).
    """
    import random

    rng = random.Random(seed)
    w = BinlogWriter(directory, server_id=11, timestamp=1_763_700_000)
    sv = status_vars(flags2=0, sql_mode=0, catalog_nz="std", charset=(45, 45, 45))
    out = SampleBinlog(Path(directory), [w.file_name])
    ts = 1_763_700_000

    def query(sql: str, schema: str = db) -> None:
        w.append(EventType.QUERY, encode_body(EventType.QUERY, thread_id=1, exec_time=0, error_code=0,
                                              status_vars=sv, db=schema, query=sql.encode()), timestamp=ts)

    query(f"CREATE DATABASE {db}", schema="")
    query(CREATE_TABLE)
    tmap = encode_table_map(table_id=42, db=db, table="t", columns=TABLE_COLUMNS)
    per_file = max(1, txns // files)
    xid = 1
    for i in range(txns):
        ts += 1
        query("BEGIN")
        w.append(EventType.TABLE_MAP, tmap, timestamp=ts)
        ids = sorted(out.final)
        kind = "insert" if len(ids) < 5 or rng.random() < 0.6 else rng.choice(["update", "delete"])
        if kind == "insert":
            rows = []
            for _ in range(rng.randint(1, 4)):
                rid = (max(out.final) + 1) if out.final else 1
                row = [rid, f"v{rid}-ü-{rng.randrange(10**6)}".encode(), rng.randrange(-2**63, 2**63),
                       rng.randbytes(pad or rng.randrange(0, 50))]
                out.final[rid] = tuple(row)
                rows.append(row)
                out.changes.append(("insert", row))
            payload = encode_rows_event(EventType.WRITE_ROWS, table_id=42, columns=TABLE_COLUMNS, rows=rows)
            w.append(EventType.WRITE_ROWS, payload, timestamp=ts)
        elif kind == "update":
            rid = rng.choice(ids)
            before = list(out.final[rid])
            after = [rid, f"u{i}".encode(), rng.randrange(-2**63, 2**63), b"x" * (i % 7)]
            out.final[rid] = tuple(after)
            out.changes.append(("update", [before, after]))
            payload = encode_rows_event(EventType.UPDATE_ROWS, table_id=42, columns=TABLE_COLUMNS,
                                        rows=[(before, after)])
            w.append(EventType.UPDATE_ROWS, payload, timestamp=ts)
        else:
            rid = rng.choice(ids)
            row = list(out.final.pop(rid))
            out.changes.append(("delete", row))
            payload = encode_rows_event(EventType.DELETE_ROWS, table_id=42, columns=TABLE_COLUMNS, rows=[row])
            w.append(EventType.DELETE_ROWS, payload, timestamp=ts)
        w.append(EventType.XID, encode_body(EventType.XID, xid=xid), timestamp=ts)
        xid += 1
        if big_event and i == txns // 2:
            ts += 1
            query("BEGIN")
            w.append(EventType.TABLE_MAP, tmap, timestamp=ts)
            rid = (max(out.final) + 1) if out.final else 1
            row = [rid, b"big", 1, bytes(range(256)) * (big_event // 256)]
            out.final[rid] = tuple(row)
            out.changes.append(("insert", row))
            w.append(EventType.WRITE_ROWS, encode_rows_event(EventType.WRITE_ROWS, table_id=42,
                                                             columns=TABLE_COLUMNS, rows=[row]), timestamp=ts)
            w.append(EventType.XID, encode_body(EventType.XID, xid=xid), timestamp=ts)
            xid += 1
        if (i + 1) % per_file == 0 and len(out.files) < files and i + 1 < txns:
            out.files.append(w.rotate(timestamp=ts))
    w.close()
    return out


# -- replicas ------------------------------------------------------------------------------------------

def slave_status(replica) -> dict:
    with replica.connect() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW SLAVE STATUS")
        return cur.fetchone() or {}


def change_master(replica, port: int, file: str, pos: int, *, heartbeat: float = 1.0,
                  user: str = USER, password: str = PASSWORD) -> None:
    replica.query(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='{user}', "
                  f"MASTER_PASSWORD='{password}', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}, "
                  f"MASTER_USE_GTID=no, MASTER_HEARTBEAT_PERIOD={heartbeat}, MASTER_CONNECT_RETRY=1")


def wait_caught_up(replica, file: str, pos: int, timeout: float = 30) -> dict:
    """Until the replica has executed up to (file, pos); fails on a replication error."""
    deadline = time.monotonic() + timeout
    while True:
        st = slave_status(replica)
        if st.get("Last_IO_Error") or st.get("Last_SQL_Error"):
            raise AssertionError(f"replication error: IO {st.get('Last_IO_Error')!r} "
                                 f"SQL {st.get('Last_SQL_Error')!r}")
        if (st.get("Relay_Master_Log_File"), st.get("Exec_Master_Log_Pos")) == (file, pos) \
                and st.get("Seconds_Behind_Master") == 0:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"replica did not reach {file}:{pos}: {st}")
        time.sleep(0.05)


def table_checksum(server, db: str, table: str) -> tuple[int, int]:
    """(row count, BIT_XOR(CRC32(CONCAT_WS(...)))) as polardbx-cdc's DataConsistencyTest computes it."""
    cols = [r[0] for r in server.query(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
        "ORDER BY ORDINAL_POSITION", args=(db, table))]
    expr = ", ".join(f"IFNULL(HEX(`{c}`), 'NULL')" for c in cols)
    row = server.query(f"SELECT COUNT(*), BIT_XOR(CAST(CRC32(CONCAT_WS(',', {expr})) AS UNSIGNED)) "
                       f"FROM `{db}`.`{table}`")[0]
    return int(row[0]), int(row[1] or 0)


class Grower:
    """Replays a finished binlog directory into an empty one, a few bytes at a time, the way a writer
    grows it: file bytes cut anywhere (also inside events), the index line added when a file's first
    bytes are written (after the previous file is complete). ``advance()`` writes one more piece."""

    def __init__(self, src: Path, dst: Path, *, steps: int = 40, seed: int = 1, base: str = "binlog") -> None:
        import random

        self.src, self.dst, self.base = Path(src), Path(dst), base
        self.files = [line.strip().rsplit("/", 1)[-1]
                      for line in (self.src / f"{base}.index").read_text().splitlines() if line.strip()]
        self.dst.mkdir(parents=True, exist_ok=True)
        self.sizes = [(self.src / f).stat().st_size for f in self.files]
        self.data = b"".join((self.src / f).read_bytes() for f in self.files)
        self.starts = [sum(self.sizes[:i]) for i in range(len(self.files))]
        rng = random.Random(seed)
        self.cuts = sorted(rng.sample(range(1, len(self.data)), steps - 1)) + [len(self.data)]
        self.written = 0

    def advance(self) -> bool:
        """Write up to the next cut; False once everything is written."""
        if not self.cuts:
            return False
        cut = self.cuts.pop(0)
        while self.written < cut:
            i = max(k for k, s in enumerate(self.starts) if s <= self.written)
            end = min(cut, self.starts[i] + self.sizes[i])
            with open(self.dst / self.files[i], "ab") as fh:
                fh.write(self.data[self.written:end])
            if self.written == self.starts[i]:
                with open(self.dst / f"{self.base}.index", "a") as idx:
                    idx.write(f"./{self.files[i]}\n")
            self.written = end
        return True

    def run(self, delay: float = 0.02) -> None:
        while self.advance():
            time.sleep(delay)


# -- the simulator's truth -----------------------------------------------------------------------------

def checksum_of(server, db: str, table: str, columns: list[str]) -> tuple[int, int]:
    """(rows, BIT_XOR(CRC32(CONCAT_WS('|', cols)))) — polardbx-cdc's DataConsistencyTest."""
    cols = ", ".join(f"`{c}`" for c in columns)
    row = server.query(f"SELECT COUNT(*), COALESCE(BIT_XOR(CAST(CRC32(CONCAT_WS('|', {cols})) AS UNSIGNED)), 0) "
                       f"FROM `{db}`.`{table}`")[0]
    return int(row[0]), int(row[1])


def truth_checksums(server, truth: dict) -> dict[str, tuple[int, int]]:
    """The truth's final tables loaded into scratch tables on ``server`` (same definition): checksums."""
    from simulator.replay import row_values

    out = {}
    for n, (key, t) in enumerate(sorted(truth["tables"].items())):
        scratch = f"truth_scratch_{n}"
        server.query(f"DROP DATABASE IF EXISTS `{scratch}`")
        server.query(f"CREATE DATABASE `{scratch}`")
        server.run_sql(f"USE `{scratch}`;\n{t['create_sql']};\n")
        for start in range(0, len(t["rows"]), 500):
            values = ", ".join(row_values(r, t["columns"]) for r in t["rows"][start:start + 500])
            server.run_sql(f"SET time_zone = '+00:00';\nINSERT INTO `{scratch}`.`{t['table']}` VALUES {values};\n")
        out[key] = checksum_of(server, scratch, t["table"], [c["name"] for c in t["columns"]])
        server.query(f"DROP DATABASE `{scratch}`")
    return out


def replica_checksums(server, truth: dict) -> dict[str, tuple[int, int]]:
    return {key: checksum_of(server, t["db"], t["table"], [c["name"] for c in t["columns"]])
            for key, t in sorted(truth["tables"].items())}


def start_serve_process(directory: Path, user: str, password: str, *extra: str) -> tuple[subprocess.Popen, int]:
    """``gbinlog serve`` of ``directory`` on a free port, ``user`` with ``password`` from the
    environment (never the command line); returns once it listens, with its port."""
    exe = os.path.join(os.path.dirname(sys.executable), "gbinlog")
    env = dict(os.environ, **{f"GBINLOG_PASSWORD_{user.upper()}": password})
    proc = subprocess.Popen([exe, "serve", "--dir", str(directory), "--port", "0", "--user", user, *extra],
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while line and "listening on" not in line:
        line = proc.stderr.readline()
    assert "listening on" in line, line
    return proc, int(line.rsplit(":", 1)[1])
