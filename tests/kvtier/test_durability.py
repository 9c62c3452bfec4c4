"""The durability drills' pure parts: the client's lines, the tally after a restart, the byte flips (data
only, never the index) and bytes on disk."""

from __future__ import annotations

import os

from fxctl.tierbench.durability import data_files, disk_bytes, flip_bytes, parse_lines, tally

OUT = """  [seq 0/cold] LOOKUP: 0/4 chunks hit (1.0 ms)
  [seq 0/cold] CHECKSUM: aaaa (4 chunks)
  [seq 0/warm] LOOKUP: 4/4 chunks hit (1.0 ms)
  [seq 0/warm] CHECKSUM: aaaa (4 chunks)
  [seq 1/cold] LOOKUP: 0/4 chunks hit (1.0 ms)
  [seq 1/cold] CHECKSUM: bbbb (4 chunks)
"""


def test_lines_and_tally():
    reference = parse_lines(OUT)
    assert reference[(0, "warm")] == {"LOOKUP": "4/4", "CHECKSUM": "aaaa"}
    after = parse_lines(OUT.replace("[seq 0/cold] LOOKUP: 0/4", "[seq 0/cold] LOOKUP: 4/4")
                        .replace("[seq 1/cold] LOOKUP: 0/4", "[seq 1/cold] LOOKUP: 2/4")
                        + "  [seq 1/warm] LOOKUP: 4/4 chunks hit (1.0 ms)\n  [seq 1/warm] CHECKSUM: cccc (4 chunks)\n")
    got = tally(reference, after, range(3))
    assert got == {"sequences": 3, "chunks": 8, "found": 6, "same_kv": 1, "different_kv": 1, "unread": 1}


def test_flips_touch_data_not_the_index(tmp_path):
    l2 = tmp_path / "l2"
    l2.mkdir()
    segment = l2 / "segment.00000"
    with open(segment, "wb") as f:
        f.write(b"\x11" * (128 << 10))      # two 64 KiB blocks of data
        f.truncate(1 << 20)                 # and unwritten space
    journal = l2 / "journal.00000"
    journal.write_bytes(b"\x22" * 4096)
    assert [p for p, _ in data_files("fxctl", str(l2))] == [str(segment)]
    assert flip_bytes("fxctl", str(l2)) == 2
    data = segment.read_bytes()
    assert data[32 << 10] == 0x11 ^ 0xFF and data[(64 << 10) + (32 << 10)] == 0x11 ^ 0xFF
    assert data.count(0xEE) == 2 and data[128 << 10:] == b"\0" * ((1 << 20) - (128 << 10))
    assert journal.read_bytes() == b"\x22" * 4096
    assert disk_bytes(str(l2)) >= os.lstat(segment).st_blocks * 512 + 4096


def test_raw_block_keeps_its_metadata_region(tmp_path):
    from fxctl.integrations.lmcache.server import RAW_BLOCK_META

    device = tmp_path / "raw_block.img"
    with open(device, "wb") as f:
        f.write(b"\x33" * (64 << 10))          # its index checkpoint lives at the start
        f.truncate(RAW_BLOCK_META + (64 << 10))
        f.seek(RAW_BLOCK_META)
        f.write(b"\x44" * (64 << 10))          # a slot
    assert data_files("raw_block", str(tmp_path)) == [(str(device), RAW_BLOCK_META)]
    assert flip_bytes("raw_block", str(tmp_path)) == 1
    with open(device, "rb") as f:
        assert f.read(64 << 10) == b"\x33" * (64 << 10)
        f.seek(RAW_BLOCK_META + (32 << 10))
        assert f.read(1) == bytes([0x44 ^ 0xFF])
