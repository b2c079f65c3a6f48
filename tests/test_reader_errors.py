"""Bad input: every truncation, every flipped bit, random bytes -> a typed BinlogError at the right offset."""

import random
import struct
import zlib

import pytest

from binlog import (
    BadMagic,
    BinlogError,
    BinlogWriter,
    ChecksumMismatch,
    EventType,
    ImpossibleEventSize,
    TruncatedEvent,
    read_all,
)
from binlog.constants import BINLOG_MAGIC


@pytest.fixture(scope="module")
def small_file(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("small")
    w = BinlogWriter(d, server_id=7, timestamp=1_700_000_000)
    w.append(EventType.XID, struct.pack("<Q", 42), timestamp=1_700_000_001)
    w.append(EventType.ROWS_QUERY, b"\x01CTS::0001", timestamp=1_700_000_002, flags=0x80)
    w.append(EventType.XID, struct.pack("<Q", 43), timestamp=1_700_000_003)
    w.close()
    return (d / "binlog.000001").read_bytes()


def boundaries(data: bytes) -> list[int]:
    """Event start offsets, walked with plain struct (independent of the reader)."""
    out, off = [], 4
    while off < len(data):
        out.append(off)
        off += struct.unpack_from("<I", data, off + 9)[0]
    assert off == len(data)
    return out


def test_file_is_what_we_think(small_file):
    starts = boundaries(small_file)
    assert len(starts) == 4
    events = read_all(small_file)
    assert [e.pos for e in events] == starts
    assert [e.type_code for e in events] == [15, 16, 29, 16]


def test_truncated_at_every_byte(small_file):
    starts = boundaries(small_file)
    for cut in range(len(small_file)):
        data = small_file[:cut]
        if cut < 4:
            with pytest.raises(BadMagic) as err:
                read_all(data)
            assert err.value.offset == 0
            continue
        if cut in starts or cut == 4:
            assert [e.pos for e in read_all(data)] == [s for s in starts if s < cut]
            continue
        inside = max(s for s in starts if s < cut)
        with pytest.raises(TruncatedEvent) as err:
            read_all(data, name="cut.bin")
        assert err.value.offset == inside, cut
        assert "cut.bin" in str(err.value) and f"offset {inside}" in str(err.value)


def test_one_flipped_bit_in_each_event(small_file):
    starts = boundaries(small_file)
    ends = starts[1:] + [len(small_file)]
    checked = 0
    for start, end in zip(starts, ends, strict=True):
        for byte in range(start, end):
            for bit in range(8):
                if start == 4 and byte == 4 + 17 and bit == 0:
                    # LOG_EVENT_BINLOG_IN_USE_F of the FDE: set by a server while the file is
                    # open, excluded from the FDE's CRC by definition; not corruption.
                    continue
                data = bytearray(small_file)
                data[byte] ^= 1 << bit
                with pytest.raises(BinlogError) as err:
                    read_all(bytes(data))
                assert err.value.offset == start, (byte, bit, err.value)
                checked += 1
    assert checked == 8 * (len(small_file) - 4) - 1


def test_flipped_magic(small_file):
    for bit in range(32):
        data = bytearray(small_file)
        data[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(BadMagic) as err:
            read_all(bytes(data))
        assert err.value.offset == 0


def test_random_bytes():
    rng = random.Random(1234)
    for n in range(200):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
        with pytest.raises(BinlogError) as err:
            read_all(data)
        assert err.value.offset == 0
        # The same garbage behind a valid magic fails at the first event.
        if len(data) >= 1:
            with pytest.raises(BinlogError) as err:
                read_all(BINLOG_MAGIC + data)
            assert err.value.offset == 4, n


def test_garbage_after_valid_events(small_file):
    rng = random.Random(99)
    for _ in range(50):
        tail = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 100)))
        with pytest.raises(BinlogError) as err:
            read_all(small_file + tail)
        assert err.value.offset == len(small_file)


def test_impossible_sizes(small_file):
    first = boundaries(small_file)[1]
    for size in (0, 1, 18, 1 << 31):
        data = bytearray(small_file)
        data[first + 9:first + 13] = struct.pack("<I", size)
        with pytest.raises(ImpossibleEventSize) as err:
            read_all(bytes(data))
        assert err.value.offset == first


def test_crc_is_checked_only_when_the_fde_says_so(tmp_path):
    w = BinlogWriter(tmp_path, checksum=False)
    w.append(EventType.XID, struct.pack("<Q", 1), timestamp=1)
    w.close()
    data = bytearray((tmp_path / "binlog.000001").read_bytes())
    assert len(read_all(bytes(data))) == 2
    assert not read_all(bytes(data))[0].ctx.checksum
    # with checksums off, the XID event is header + 8 bytes, no CRC
    assert read_all(bytes(data))[1].header.event_size == 19 + 8


def test_checksum_mismatch_names_file(tmp_path, small_file):
    data = bytearray(small_file)
    data[-1] ^= 0xFF
    p = tmp_path / "mysql-bin.000009"
    p.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch) as err:
        read_all(p)
    assert str(p) in str(err.value)
    assert err.value.offset == boundaries(small_file)[-1]
    # and the stored CRC really is zlib.crc32 of the event without its last 4 bytes
    last = boundaries(small_file)[-1]
    assert zlib.crc32(small_file[last:-4]) == struct.unpack("<I", small_file[-4:])[0]
