"""Server-side prepared statements: COM_STMT_PREPARE / EXECUTE / SEND_LONG_DATA / RESET / CLOSE / FETCH,
with binary result rows (the protocol drivers use for ``cursor(prepared=True)``, JDBC
``useServerPrepStmts``, Go's database/sql placeholders…).

A statement is the text with its ``?`` placeholders; EXECUTE binds the typed parameter values as SQL
literals into the text and answers it like COM_QUERY (``QueryHandler``), so a prepared statement answers
exactly what the same text would. At PREPARE a read statement (SELECT/SHOW/DESC) is run once with NULL
parameters to announce its result columns; a statement that would change data is refused right there,
naming it. Bad packets get an ERR, never a dropped connection.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from binlog.lenenc import read_packed_int
from dumper.server import protocol as p

if TYPE_CHECKING:
    from dumper.server.queries import QueryHandler, Session

COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17
COM_STMT_SEND_LONG_DATA = 0x18
COM_STMT_CLOSE = 0x19
COM_STMT_RESET = 0x1A
COM_STMT_FETCH = 0x1C
STMT_COMMANDS = frozenset({COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE,
                           COM_STMT_RESET, COM_STMT_FETCH})
MAX_STATEMENTS = 1000          # per connection (MySQL's max_prepared_stmt_count is per server)
MAX_LONG_DATA = 1 << 20        # bytes kept per statement from COM_STMT_SEND_LONG_DATA
ER_UNKNOWN_STMT_HANDLER = 1243
ER_MAX_PREPARED_STMT_COUNT_REACHED = 1461
ER_STMT_HAS_NO_OPEN_CURSOR = 1421
ER_MALFORMED_PACKET = 1835
_READ_HEADS = ("select", "show", "desc", "describe", "explain")

_INTS = {0x01: (1, "<b", "<B"), 0x02: (2, "<h", "<H"), 0x0D: (2, "<h", "<H"), 0x03: (4, "<i", "<I"),
         0x09: (4, "<i", "<I"), 0x08: (8, "<q", "<Q")}


class Malformed(Exception):
    pass


@dataclass
class Statement:
    id: int
    sql: str
    holes: list[int]                 # offsets of the ``?`` placeholders in ``sql``
    columns: list[p.Column]
    types: list[tuple[int, bool]] = field(default_factory=list)   # (type, unsigned) last bound
    long_data: dict[int, bytearray] = field(default_factory=dict)


def placeholders(sql: str) -> list[int]:
    """Offsets of the ``?`` outside quotes, backticks and comments."""
    out = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            i += 1
            while i < n and sql[i] != c:
                i += 2 if sql[i] == "\\" and c != "`" else 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 1
        elif c == "#" or sql.startswith("-- ", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
        elif c == "?":
            out.append(i)
        i += 1
    return out


def sql_literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    text = str(value)
    return "'" + text.replace("\\", "\\\\").replace("'", "''").replace("\0", "\\0") + "'"


def bind(sql: str, holes: list[int], values: list[object]) -> str:
    out = []
    last = 0
    for pos, value in zip(holes, values, strict=True):
        out.append(sql[last:pos])
        out.append(sql_literal(value))
        last = pos + 1
    out.append(sql[last:])
    return "".join(out)


# -- parameter values (binary protocol) ------------------------------------------------------------------

def _lenenc(buf: bytes, off: int) -> tuple[int, int]:
    try:
        return read_packed_int(buf, off)
    except (IndexError, ValueError) as exc:   # past the end, or a prefix that is no length
        raise Malformed(f"bad length-encoded integer in the packet at {off}: {exc}") from None


def read_value(buf: bytes, off: int, type_code: int, unsigned: bool) -> tuple[object, int]:
    """One parameter value of COM_STMT_EXECUTE."""
    try:
        if type_code in _INTS:
            size, signed_fmt, unsigned_fmt = _INTS[type_code]
            return struct.unpack_from(unsigned_fmt if unsigned else signed_fmt, buf, off)[0], off + size
        if type_code == 0x04:
            return struct.unpack_from("<f", buf, off)[0], off + 4
        if type_code == 0x05:
            return struct.unpack_from("<d", buf, off)[0], off + 8
        if type_code == 0x06:
            return None, off
        if type_code in (0x07, 0x0A, 0x0C):
            n = buf[off]
            raw = buf[off + 1:off + 1 + n] + bytes(11)
            if off + 1 + n > len(buf):
                raise Malformed("packet ends inside a date")
            year, month, day, hour, minute, second, micro = struct.unpack_from("<HBBBBBI", raw)
            if type_code == 0x0A or n <= 4:
                return f"{year:04d}-{month:02d}-{day:02d}", off + 1 + n
            return (f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
                    + (f".{micro:06d}" if micro else "")), off + 1 + n
        if type_code == 0x0B:
            n = buf[off]
            raw = buf[off + 1:off + 1 + n] + bytes(12)
            if off + 1 + n > len(buf):
                raise Malformed("packet ends inside a time")
            negative, days, hour, minute, second, micro = struct.unpack_from("<BIBBBI", raw)
            text = f"{'-' if negative else ''}{days * 24 + hour:02d}:{minute:02d}:{second:02d}"
            return text + (f".{micro:06d}" if micro else ""), off + 1 + n
        length, off = _lenenc(buf, off)
        if off + length > len(buf):
            raise Malformed("packet ends inside a string parameter")
        return bytes(buf[off:off + length]), off + length
    except (struct.error, IndexError):
        raise Malformed("packet ends inside a parameter") from None


# -- binary result rows ----------------------------------------------------------------------------------

def binary_result(result: list, status: int) -> list[bytes]:
    """A ``ResultSet``'s columns and rows in the binary protocol: column count, definitions, EOF,
    binary rows (0x00, NULL bitmap at offset 2, values), EOF. Integer columns holding anything but
    integers, and columns of other types (decimals, doubles, times), are sent as strings."""
    columns = list(result.columns)
    rows = result.rows
    for i, col in enumerate(columns):
        if col.type != p.TYPE_LONGLONG or any(r[i] is not None and not isinstance(r[i], int) for r in rows):
            columns[i] = p.Column(col.name)
    out = [p.pack_int(len(columns))] + [c.definition() for c in columns] + [p.eof_packet(status)]
    width = (len(columns) + 7 + 2) // 8
    for row in rows:
        nulls = bytearray(width)
        values = []
        for i, (col, value) in enumerate(zip(columns, row, strict=True)):
            if value is None:
                nulls[(i + 2) // 8] |= 1 << ((i + 2) % 8)
            elif col.type == p.TYPE_LONGLONG:
                values.append(struct.pack("<q" if value < 1 << 63 else "<Q", value))
            else:
                values.append(p.text_value(value))
        out.append(b"\x00" + bytes(nulls) + b"".join(values))
    out.append(p.eof_packet(status))
    return out


class PreparedStatements:
    """The COM_STMT_* commands of every session (statements live in ``Session.statements``)."""

    def __init__(self, handler: QueryHandler) -> None:
        self.handler = handler

    def handle(self, session: Session, payload: bytes) -> list[bytes]:
        """The reply payloads (none for SEND_LONG_DATA and CLOSE, which MySQL never answers)."""
        cmd = payload[0]
        try:
            if cmd == COM_STMT_PREPARE:
                return self._prepare(session, payload[1:].decode("utf-8", "replace"))
            if len(payload) < 5:
                if cmd in (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA):
                    return []  # never answered, even when malformed: the client reads no reply
                raise Malformed("the statement id is missing")
            stmt_id = struct.unpack_from("<I", payload, 1)[0]
            stmt = session.statements.get(stmt_id)
            if cmd == COM_STMT_CLOSE:
                session.statements.pop(stmt_id, None)
                return []
            if cmd == COM_STMT_SEND_LONG_DATA:
                if stmt is not None and len(payload) >= 7:
                    param = struct.unpack_from("<H", payload, 5)[0]
                    data = stmt.long_data.setdefault(param, bytearray())
                    data += payload[7:7 + max(0, MAX_LONG_DATA - len(data))]
                return []
            if stmt is None:
                name = {COM_STMT_EXECUTE: "mysqld_stmt_execute", COM_STMT_RESET: "mysqld_stmt_reset",
                        COM_STMT_FETCH: "mysqld_stmt_fetch"}[cmd]
                return [p.err_packet(ER_UNKNOWN_STMT_HANDLER,
                                     f"Unknown prepared statement handler ({stmt_id}) given to {name}")]
            if cmd == COM_STMT_RESET:
                stmt.long_data.clear()
                return [p.ok_packet(status=session.status)]
            if cmd == COM_STMT_FETCH:
                return [p.err_packet(ER_STMT_HAS_NO_OPEN_CURSOR, f"The statement ({stmt_id}) has no open cursor.")]
            return self._execute(session, stmt, payload)
        except Malformed as exc:
            return [p.err_packet(ER_MALFORMED_PACKET, f"Malformed communication packet: {exc}", "08S01")]

    def _prepare(self, session: Session, sql: str) -> list[bytes]:
        from dumper.server.queries import READ_ONLY_REFUSED, ResultSet, read_only_error
        from dumper.server.sqltext import UnclosedComment, split_statements
        try:
            texts = split_statements(sql, self.handler.version)
        except UnclosedComment:
            texts = [sql]
        words = texts[0].split(None, 2) if texts else []
        head = words[0].lower() if words else ""
        if not head:
            return [p.err_packet(1065, "Query was empty", "42000")]
        if head in READ_ONLY_REFUSED:
            err = read_only_error([w.lower() for w in words])
            return [p.err_packet(err.code, err.message, err.sqlstate)]
        if len(session.statements) >= MAX_STATEMENTS:
            return [p.err_packet(ER_MAX_PREPARED_STMT_COUNT_REACHED, "Can't create more than "
                                 f"max_prepared_stmt_count statements (current value: {MAX_STATEMENTS})", "42000")]
        holes = placeholders(sql)
        columns: list[p.Column] = []
        if head in _READ_HEADS:
            reply = self.handler.handle(session, bind(sql, holes, [None] * len(holes)))
            if reply and reply[0][:1] == b"\xff":
                return reply
            if isinstance(reply, ResultSet):
                columns = reply.columns
        stmt = Statement(session.next_statement, sql, holes, columns)
        session.next_statement += 1
        session.statements[stmt.id] = stmt
        out = [b"\x00" + struct.pack("<IHHBH", stmt.id, len(columns), len(holes), 0, 0)]
        if holes:
            out += [p.Column("?").definition() for _ in holes] + [p.eof_packet(session.status)]
        if columns:
            out += [c.definition() for c in columns] + [p.eof_packet(session.status)]
        return out

    def _execute(self, session: Session, stmt: Statement, payload: bytes) -> list[bytes]:
        from dumper.server.queries import ResultSet

        values = self._parameters(stmt, payload)
        stmt.long_data.clear()
        reply = self.handler.handle(session, bind(stmt.sql, stmt.holes, values))
        if isinstance(reply, ResultSet):
            return binary_result(reply, session.status)
        return reply

    @staticmethod
    def _parameters(stmt: Statement, payload: bytes) -> list[object]:
        n = len(stmt.holes)
        off = 1 + 4 + 1 + 4          # command, statement id, flags, iteration count
        if n == 0:
            return []
        if len(payload) < off + (n + 7) // 8 + 1:
            raise Malformed(f"COM_STMT_EXECUTE for {n} parameter(s) ends early")
        nulls = payload[off:off + (n + 7) // 8]
        off += (n + 7) // 8
        if payload[off]:
            off += 1
            if len(payload) < off + 2 * n:
                raise Malformed("COM_STMT_EXECUTE ends inside the parameter types")
            stmt.types = [(payload[off + 2 * i], bool(payload[off + 2 * i + 1] & 0x80)) for i in range(n)]
            off += 2 * n
        else:
            off += 1
        if len(stmt.types) != n:
            raise Malformed("COM_STMT_EXECUTE without parameter types")
        values: list[object] = []
        for i, (type_code, unsigned) in enumerate(stmt.types):
            if i in stmt.long_data:
                values.append(bytes(stmt.long_data[i]))
            elif nulls[i // 8] >> (i % 8) & 1:
                values.append(None)
            else:
                value, off = read_value(payload, off, type_code, unsigned)
                values.append(value)
        return values

