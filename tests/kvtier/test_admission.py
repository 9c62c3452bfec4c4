"""Write admission for L2 (l2_admission) and borrowed puts: what reaches L2 under each policy, what is
counted, what a restart finds; a borrowed buffer is released once, after its write."""

import threading

import pytest
from kvtier_helpers import chunk_bytes

from fxctl.kvtier import TierConfig, TierStore
from fxctl.kvtier.admission import ADMISSION_POLICIES, Admission
from fxctl.kvtier.buffers import aligned_buffer

SIZE = 256 * 1024


def chunk(i) -> bytes:
    return chunk_bytes(f"c{i}", SIZE)


def store(path, policy, l1_chunks=4, **kw):
    return TierStore(TierConfig(l2_path=path, l1_bytes=l1_chunks * SIZE, l2_bytes=64 << 20,
                                segment_bytes=16 << 20, l2_admission=policy, protected_share=0.5, durable=False,
                                **kw))


def counters(st):
    return st.stats()["counters"]


def test_bad_policy_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="always, second-use, l1-evict"):
        TierConfig(l2_admission="sometimes")
    assert TierConfig.from_mapping({"l2_admission": "second-use"}).l2_admission == "second-use"
    assert TierConfig().l2_admission == "always" and set(ADMISSION_POLICIES) == {"always", "second-use", "l1-evict"}


def test_always_writes_every_put(disk_dir):
    with store(disk_dir, "always") as st:
        for i in range(3):
            st.put(f"k{i}", chunk(i))
        st.flush()
        c = counters(st)
        assert c["l2_bytes_written"] == c["put_bytes"] == 3 * SIZE and "l2_admissions_refused" not in c


def test_second_use_writes_on_an_l1_hit_or_a_second_put(disk_dir):
    with store(disk_dir, "second-use", l1_chunks=2) as st:
        st.put("hit", chunk(1))
        st.flush()
        assert st.l2.index.get("hit") is None and "l2_admissions_refused" not in counters(st)  # deferred
        out = aligned_buffer(SIZE)
        assert st.get_into(["hit"], [out]) == [SIZE]   # the second use: queued now
        st.flush()
        assert "hit" in st.l2.index
        st.put("again", chunk(2))
        st.put("x", chunk(3))
        st.put("y", chunk(4))                      # L1 (2 chunks) evicts "again": used once, dropped
        st.flush()
        assert "again" not in st.l2.index and "again" not in st.l1
        assert counters(st)["l2_admissions_refused"] == 2  # "again" and then "x", each used once
        st.put("again", chunk(2))                  # recomputed and put a second time: written
        st.flush()
        assert "again" in st.l2.index
        c = counters(st)
        assert c["l2_bytes_written"] == 2 * SIZE and c["put_bytes"] == 5 * SIZE


def test_l1_evict_writes_only_what_l1_evicts_and_restart_finds_only_that(disk_dir):
    with store(disk_dir, "l1-evict", l1_chunks=2) as st:
        for i in range(4):
            st.put(f"k{i}", chunk(i))
        st.flush()
        assert sorted(st.l2.index) == ["k0", "k1"] and counters(st)["l2_bytes_written"] == 2 * SIZE
    with store(disk_dir, "l1-evict", l1_chunks=2) as st:  # L1's k2, k3 were never written: gone
        assert st.contains(["k0", "k1"]) == 2 and st.contains(["k2"]) == 0
        out = aligned_buffer(SIZE)
        assert st.get_into(["k1"], [out]) == [SIZE] and bytes(out) == bytes(chunk(1))


def test_l1_evict_without_l1_writes_through(disk_dir):
    with store(disk_dir, "l1-evict", l1_chunks=0) as st:
        st.put("k", chunk(0))
        st.flush()
        assert "k" in st.l2.index


def test_second_use_remembers_a_bounded_number_of_keys():
    adm = Admission("second-use", remembered=2)
    assert [adm.on_put(k, True) for k in ("a", "b", "c")] == [False] * 3  # "a" forgotten
    assert adm.on_put("a", True) is False and adm.on_put("c", True) is True


def test_borrowed_put_is_released_once_after_its_write(disk_dir):
    released = threading.Event()
    calls = []
    buf = aligned_buffer(SIZE)
    buf[:] = chunk(7)
    with store(disk_dir, "always", l1_chunks=0) as st:
        def release():
            calls.append("k" in st.l2.index)  # already committed to L2 when released
            released.set()
        assert st.put("k", buf, release=release)
        assert released.wait(10)
        st.flush()
        assert calls == [True]
        buf[:] = b"\0" * SIZE  # the owner reuses its buffer: the stored chunk is unaffected
        out = aligned_buffer(SIZE)
        assert st.get_into(["k"], [out]) == [SIZE] and bytes(out) == bytes(chunk(7))


def test_put_with_l1_copies_and_releases_at_once(disk_dir):
    calls = []
    with store(disk_dir, "always") as st:
        st.put("k", aligned_buffer(SIZE), release=lambda: calls.append(1))
        assert calls == [1]


def test_the_policy_reaches_both_serving_paths():
    from fxctl.integrations.lmcache.config import render_lmcache_config, tier_config_from_extra
    from fxctl.integrations.lmcache.server import adapter_spec

    cfg = render_lmcache_config(l2_path="/x", l2_bytes=1 << 30, cpu_bytes=1 << 30, l2_admission="l1-evict")
    assert tier_config_from_extra(cfg["extra_config"]).l2_admission == "l1-evict"
    spec = adapter_spec("/x", 1 << 30, l2_admission="second-use")
    assert TierConfig.from_mapping(spec["adapter_params"]).l2_admission == "second-use"


def test_a_profile_names_only_known_policies():
    from fxctl.sim.profile import TiersSection

    assert TiersSection(l2_admission="second-use").l2_admission.value == "second-use"
    with pytest.raises(Exception, match="l1-evict"):
        TiersSection(l2_admission="never")


def test_the_admission_benchmark_replays_both_workloads(tmp_path, capsys):
    from benchmarks import tier_admission

    out = tmp_path / "adm.json"
    tier_admission.main(["--dir", str(tmp_path / "d"), "--sessions", "4", "--concurrency", "4", "--prompts", "6",
                         "--chunk-kib", "64", "--l1-share", "0.25", "--json", str(out)])
    rows = {(r["workload"], r["policy"]): r for r in __import__("json").loads(out.read_text())["rows"]}
    assert rows["multi-turn", "always"]["write_amplification"] == 1.0
    assert rows["cold-recovery", "always"]["found_after_restart"] == 1.0
    assert rows["cold-recovery", "second-use"]["write_amplification"] == 0.0   # every prompt used once
    assert 0 < rows["cold-recovery", "l1-evict"]["found_after_restart"] < 1.0  # L1's part lost at the restart
    assert "| multi-turn |" in capsys.readouterr().out


def test_preallocate_lays_out_segments_within_the_capacity(disk_dir):
    with store(disk_dir, "always") as st:
        assert st.preallocate(40 << 20) == 3          # 16 MiB segments
        assert st.preallocate(1 << 40) == 4           # at most l2_bytes (64 MiB)
        st.put("k", chunk(1))
        st.flush()
        assert st.stats()["l2"]["segments"] == 4
