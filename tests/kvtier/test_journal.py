"""The journal: records survive a restart, a torn tail is cut off at any byte, checkpoints replace it."""

import os

from fxctl.kvtier.journal import OP_DEL, OP_PUT, ChunkLocation, Journal, decode_all, encode


def loc(i: int) -> ChunkLocation:
    return ChunkLocation(segment=i % 3, page=i * 2, pages=2, nbytes=100_000 + i, crc=i * 7, meta=b"m%d" % i,
                         algorithm=2)


def test_encode_decode_round_trip():
    data = encode(OP_PUT, "model@1@0@abc@bfloat16", loc(5)) + encode(OP_DEL, "gone")
    records, good = decode_all(data)
    assert good == len(data)
    assert records == [(OP_PUT, "model@1@0@abc@bfloat16", loc(5)), (OP_DEL, "gone", None)]


def test_torn_tail_is_ignored_at_every_cut(tmp_path):
    whole = b"".join(encode(OP_PUT, f"k{i}", loc(i)) for i in range(3))
    first_two = len(encode(OP_PUT, "k0", loc(0))) + len(encode(OP_PUT, "k1", loc(1)))
    for cut in range(first_two, len(whole)):
        records, good = decode_all(whole[:cut])
        assert [k for _op, k, _l in records] == ["k0", "k1"]
        assert good == first_two


def test_flipped_byte_stops_replay_there():
    a, b = encode(OP_PUT, "a", loc(1)), encode(OP_PUT, "b", loc(2))
    damaged = bytearray(a + b)
    damaged[len(a) + 20] ^= 0xFF
    records, good = decode_all(bytes(damaged))
    assert [k for _op, k, _l in records] == ["a"] and good == len(a)


def test_recover_replays_puts_and_deletes_and_cuts_the_torn_tail(tmp_path):
    d = str(tmp_path)
    j = Journal(d, durable=True)
    assert j.recover() == {}
    j.append([encode(OP_PUT, f"k{i}", loc(i)) for i in range(5)])
    j.append([encode(OP_DEL, "k1"), encode(OP_PUT, "k2", loc(9))])
    j.close()
    path = os.path.join(d, "journal.0")
    with open(path, "ab") as f:
        f.write(encode(OP_PUT, "half", loc(3))[:17])
    j = Journal(d)
    index = j.recover()
    assert list(index) == ["k0", "k3", "k4", "k2"]
    assert index["k2"] == loc(9)
    assert j.torn_bytes == 17
    assert os.path.getsize(path) == len(b"".join(encode(OP_PUT, f"k{i}", loc(i)) for i in range(5))) + len(
        encode(OP_DEL, "k1")) + len(encode(OP_PUT, "k2", loc(9)))
    j.close()


def test_checkpoint_starts_a_new_generation_and_removes_leftovers(tmp_path):
    d = str(tmp_path)
    j = Journal(d)
    j.recover()
    j.append([encode(OP_PUT, f"k{i}", loc(i)) for i in range(4)])
    index = {f"k{i}": loc(i) for i in range(4)}
    j.checkpoint(index)
    j.append([encode(OP_DEL, "k0")])
    j.close()
    assert sorted(os.listdir(d)) == ["journal.1", "manifest"]
    # a crash during the next checkpoint leaves a temporary manifest and the next journal behind
    open(os.path.join(d, "manifest.tmp"), "wb").write(b"partial")
    open(os.path.join(d, "journal.2"), "wb").close()
    j = Journal(d)
    index = j.recover()
    assert list(index) == ["k1", "k2", "k3"]
    assert sorted(j.leftovers_removed) == ["journal.2", "manifest.tmp"]
    assert sorted(os.listdir(d)) == ["journal.1", "manifest"]
    j.close()
