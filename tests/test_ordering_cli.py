"""``gbinlog txns DN_DIR...``: the ordered transactions, one line each."""

from __future__ import annotations

from click.testing import CliRunner

from extractor.vtso import storage_sequence
from gbinlog.cli import main
from tests.test_ordering_dn_writer import DnWriter, Stmt, hint, xid_text

TSO1 = (1_700_000_000_000 << 22) | 1
TSO2 = (1_700_000_000_009 << 22) | 2


def test_txns_prints_global_order_with_branches_tables_and_rows(tmp_path):
    a0, a1, b0 = xid_text(0xA, "G_P00000_GROUP"), xid_text(0xA, "G_P00001_GROUP"), xid_text(0xB, "G_P00000_GROUP")
    w0, w1 = DnWriter(tmp_path, "dn0"), DnWriter(tmp_path, "dn1")
    w0.prepare(a0, [Stmt("g_p00000", "acc", rows=[[1, 1], [2, 2]], hint=hint(1))])
    w1.prepare(a1, [Stmt("g_p00001", "acc", rows=[[3, 3]], hint=hint(2))])
    w0.prepare(b0, [Stmt("g_p00000", "acc", hint=hint(1))])
    w0.commit(b0, TSO2)                                # written first, ordered second
    w0.commit(a0, TSO1)
    w1.commit(a1, TSO1)
    w1.local([Stmt("g_p00001", "log", rows=[[9, 9]] * 3)])
    w0.close()
    w1.close()
    res = CliRunner().invoke(main, ["txns", "--cluster-stopped", str(w0.dir), str(w1.dir)])
    assert res.exit_code == 0, res.output
    res_full = res.output.splitlines()
    assert res_full == [
        f"{TSO1:019d}{0xA:019d}{'0' * 16} dml          tso={TSO1} branches=dn0:G_P00000_GROUP,"
        "dn1:G_P00001_GROUP rows: g_p00000.acc=2 g_p00001.acc=1",
        f"{TSO1:019d}{0xA:019d}{1:010d}{storage_sequence('dn1')} dml          tso=- branches=dn1:local "
        "rows: g_p00001.log=3",
        f"{TSO2:019d}{0xB:019d}{'0' * 16} dml          tso={TSO2} branches=dn0:G_P00000_GROUP "
        "rows: g_p00000.acc=1",
        "# 3 txns: dml 3",
    ]
    # without --cluster-stopped, as the global binlog: dn1's input ends at its local transaction
    # (it passed that vtso only), so B, above it, is held back
    res = CliRunner().invoke(main, ["txns", str(w0.dir), str(w1.dir)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[:2] == res_full[:2] and lines[2] == "# 2 txns: dml 2"
    assert lines[3].startswith(f"# held back 1 transaction(s) from vtso {TSO2:019d}{0xB:019d}{'0' * 16} on: "
                               f"DN dn1's input ends at mysql-bin.000001:"), lines[3]
    assert lines[3].endswith(f"(it passed vtso {TSO1:019d}{0xA:019d}{1:010d}{storage_sequence('dn1')})")


def test_txns_reports_bad_input_with_dn_file_offset(tmp_path):
    w = DnWriter(tmp_path, "dn5")
    pos = w.commit(xid_text(1, "G"), TSO1)
    w.close()
    res = CliRunner().invoke(main, ["txns", str(w.dir)])
    assert res.exit_code == 1
    assert f"DN dn5: mysql-bin.000001: offset {pos}: XA COMMIT" in res.output
