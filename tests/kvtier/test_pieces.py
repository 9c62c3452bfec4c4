"""Chunks moved in pieces where the CPU copies the bytes (tmpfs, page cache), each piece checksummed as it
passes, and in one request per chunk on a block device with O_DIRECT: the same bytes and the same
checksums either way, a flipped byte in any piece still a miss, and the reader count bounded by the CPUs."""

import os

import pytest
from kvtier_helpers import chunk_bytes, small_config

from fxctl.kvtier import TierStore
from fxctl.kvtier.buffers import aligned_buffer
from fxctl.kvtier.checksum import CRC32, XXH3, Digest, available, checksum
from fxctl.kvtier.config import PAGE_BYTES
from fxctl.kvtier.segments import SegmentFiles, on_block_device, usable_cpus


@pytest.mark.parametrize("algorithm", [CRC32, XXH3])
def test_a_digest_fed_in_pieces_equals_the_checksum_of_the_whole(algorithm):
    if not available(algorithm):
        pytest.skip("xxhash is not installed")
    data = os.urandom(3 * 65536 + 123)
    digest = Digest(algorithm)
    for start in range(0, len(data), 7000):
        digest.update(memoryview(data)[start:start + 7000])
    assert digest.value() == checksum(algorithm, data)


def test_an_unknown_algorithm_is_refused():
    with pytest.raises(ValueError):
        Digest(99)


def test_request_size_follows_who_copies(tmp_path, tmpfs_dir):
    disk = str(tmp_path)
    assert on_block_device(disk)
    assert not on_block_device(tmpfs_dir)
    on_disk = SegmentFiles(disk, 1 << 20, direct_io=True, max_request_bytes=8 << 20, piece_bytes=64 << 10)
    assert on_disk.direct and not on_disk.cpu_copies and on_disk.request_bytes == 8 << 20
    buffered = SegmentFiles(disk, 1 << 20, direct_io=False, max_request_bytes=8 << 20, piece_bytes=64 << 10)
    assert buffered.cpu_copies and buffered.request_bytes == 64 << 10
    in_memory = SegmentFiles(tmpfs_dir, 1 << 20, direct_io=True, max_request_bytes=8 << 20, piece_bytes=64 << 10)
    assert in_memory.cpu_copies and in_memory.request_bytes == 64 << 10


def test_pieces_carry_the_first_bytes_into_the_digest_and_no_more(tmp_path):
    files = SegmentFiles(str(tmp_path), 1 << 20, direct_io=False, piece_bytes=4096)
    files.create(0)
    data = aligned_buffer(5 * 4096)
    data[:] = os.urandom(len(data))
    nbytes = 4 * 4096 + 100  # the chunk ends inside the last piece; the rest is padding
    wrote = Digest(CRC32)
    files.write_from(0, PAGE_BYTES, data, wrote, nbytes)
    back = aligned_buffer(5 * 4096)
    read = Digest(CRC32)
    files.read_into(0, PAGE_BYTES, back, read, nbytes)
    files.close()
    assert bytes(back) == bytes(data)
    assert wrote.value() == read.value() == checksum(CRC32, data[:nbytes])


@pytest.mark.parametrize("piece", [4096, 65536, 1 << 20])
def test_store_round_trip_and_a_flipped_byte_in_a_late_piece(tmpfs_dir, piece):
    size = 300_000  # several pieces at 4 KiB and 64 KiB, one at 1 MiB, not a multiple of any
    cfg = small_config(tmpfs_dir, l1_bytes=0, piece_bytes=piece)
    with TierStore(cfg) as store:
        assert store.l2.files.cpu_copies and store.l2.files.request_bytes == piece
        for key in ("a", "b"):
            store.put(key, chunk_bytes(key, size))
        store.flush()
        loc = store.l2.index["b"].loc
    with open(os.path.join(tmpfs_dir, f"segment.{loc.segment:05d}"), "r+b") as f:
        f.seek(loc.page * PAGE_BYTES + size - 10)
        byte = f.read(1)
        f.seek(loc.page * PAGE_BYTES + size - 10)
        f.write(bytes([byte[0] ^ 0x40]))
    with TierStore(cfg) as store:
        outs = [bytearray(size), bytearray(size)]
        got = store.get_into(["a", "b"], outs)
        assert got == [size, None]
        assert bytes(outs[0]) == chunk_bytes("a", size)
        assert store.stats()["counters"]["l2_checksum_failures"] == 1


def test_readers_where_the_cpu_copies_are_bounded_by_the_cpus(tmpfs_dir, monkeypatch):
    seen = []
    cfg = small_config(tmpfs_dir, l1_bytes=0, io_threads=16, inflight_bytes=1 << 30)
    with TierStore(cfg) as store:
        for i in range(24):
            store.put(f"k{i}", chunk_bytes(f"k{i}", 8192))
        store.flush()
        submit = store._readers.submit
        monkeypatch.setattr(store._readers, "submit", lambda fn: seen.append(fn) or submit(fn))
        outs = [bytearray(8192) for _ in range(24)]
        assert store.get_into([f"k{i}" for i in range(24)], outs) == [8192] * 24
    assert len(seen) == max(2, min(16, usable_cpus()))


@pytest.mark.parametrize("field,value", [("piece_bytes", 0), ("piece_bytes", 5000), ("piece_bytes", -4096),
                                         ("max_request_bytes", 1000)])
def test_request_sizes_must_be_whole_pages(field, value):
    from fxctl.kvtier import TierConfig

    with pytest.raises(ValueError, match=field):
        TierConfig(**{field: value})
    with pytest.raises(ValueError, match=field):
        TierConfig.from_mapping({field: str(value)})
