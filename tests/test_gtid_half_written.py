"""``@@gtid_executed`` and the start of an auto-position dump count a transaction once it is whole
(its CTS marker written), not at its GTID event: a served file read while the writer is half-way
through a transaction must not say that transaction is there. Otherwise a client that holds every
GTID up to the half-written one is served it again from the end of the one before (an HA
follower catching up met exactly this: a client holding 1-804 got 804 again)."""

from __future__ import annotations

import struct
from pathlib import Path

from binlog import read_events
from dumper.server.gtid_dump import GtidFiles, dump_gtid_request
from gbinlog.local_engine import Settings, build

ROOT = Path(__file__).resolve().parents[1]
GTID = 33


def test_a_half_written_transaction_is_not_executed_until_its_end(tmp_path):
    built = tmp_path / "built"
    build(sorted(p for p in (ROOT / "fixtures" / "drift-2dn").iterdir() if p.is_dir()), built, settings=Settings())
    name = sorted(p.name for p in built.glob("binlog.0*"))[-1]
    data = (built / name).read_bytes()
    events = list(read_events(data))
    gtids = [(ev.pos, struct.unpack_from("<q", ev.raw, 19 + 17)[0]) for ev in events if ev.header.type_code == GTID]
    (last_start, last_gno), (_, before_gno) = gtids[-1], gtids[-2]
    served = tmp_path / "served"
    served.mkdir()
    (served / (built / "binlog.index").name).write_bytes((built / "binlog.index").read_bytes())
    for other in built.glob("binlog.0*"):
        if other.name != name:
            (served / other.name).write_bytes(other.read_bytes())
    # the writer is inside the last transaction: its GTID event and BEGIN are out, not its end
    begin_end = next(ev.pos + len(ev.raw) for ev in events if ev.pos > last_start)
    (served / name).write_bytes(data[:begin_end])
    files = sorted(p.name for p in served.glob("binlog.0*"))
    gf = GtidFiles(served)
    sid, executed = gf.executed(files)
    assert executed == before_gno == last_gno - 1
    assert gf.head(files) == (name, last_start)           # the end of the last whole transaction
    # a client holding everything executed starts at that end, the half-written one next
    # COM_BINLOG_DUMP_GTID: flags, server id, no file name, position 4, the set {sid: 1-executed}
    sid_block = sid + struct.pack("<QQQ", 1, 1, executed + 1)
    payload = struct.pack("<HI", 0, 42) + struct.pack("<I", 0) + struct.pack("<Q", 4) \
        + struct.pack("<I", 8 + len(sid_block)) + struct.pack("<Q", 1) + sid_block
    req = dump_gtid_request(payload, gf, served, files)
    assert (req.file, req.position) == (name, last_start)
    # the rest arrives: now it is executed (the scan goes on from where the last whole one ended)
    (served / name).write_bytes(data)
    assert gf.executed(files) == (sid, last_gno)
    assert gf.head(files) == (name, len(data))
