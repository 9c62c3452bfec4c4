"""The fill fault's shell script against fake df/fallocate/dd that behave like XFS over md RAID0: a single
fallocate of the whole free figure fails with ENOSPC (the allocation needs metadata blocks too, and stripe
alignment wastes some), which is what failed the lab drill (the script used to fallocate df's figure once)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fxctl.errors import FxError
from fxctl.lab import fault

CAPACITY = 512 << 20

FAKES = {
    "mountpoint": "exit 0\n",
    # df --output=avail -B1 DIR, or df --output=size,used,avail -B1 DIR
    "df": r"""used=$(cat "$FAKE_FS/used"); avail=$((CAPACITY - used))
echo header
case "$1" in *size*) echo " $CAPACITY $used $avail" ;; *) echo " $avail" ;; esac
""",
    # fallocate [-o OFF] -l LEN FILE: ENOSPC unless LEN fits in what is free less 1% and 8 KiB (metadata)
    "fallocate": r"""while [ "$#" -gt 1 ]; do case "$1" in -l) len=$2; shift 2 ;; -o) shift 2 ;; *) shift ;; esac; done
echo "$len" >> "$FAKE_FS/calls"
used=$(cat "$FAKE_FS/used"); avail=$((CAPACITY - used))
if [ "$len" -gt $((avail - avail / 100 - 8192)) ]; then echo "fallocate: No space left on device" >&2; exit 1; fi
echo $((used + len)) > "$FAKE_FS/used"
""",
    "dd": r"""used=$(cat "$FAKE_FS/used"); [ $((CAPACITY - used)) -ge 1048576 ]""",
}


@pytest.fixture
def fake_xfs(tmp_path: Path):
    bin_dir, fs = tmp_path / "bin", tmp_path / "fs"
    bin_dir.mkdir()
    fs.mkdir()
    (fs / "used").write_text("0\n")
    for name, body in FAKES.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir, fs


def run_fill(fake_xfs, leave: int) -> subprocess.CompletedProcess:
    bin_dir, fs = fake_xfs
    command = fault.script(fault._FILL, str(fs), str(leave), fault.FILL_NAME).render()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_FS": str(fs), "CAPACITY": str(CAPACITY)}
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=60)


def test_fill_steps_down_past_enospc_until_the_filesystem_is_full(fake_xfs):
    result = run_fill(fake_xfs, leave=0)
    assert result.returncode == 0, result.stderr
    size, used, free, filled, tries, probe = fault.parse_fill(result.stdout)
    calls = [int(n) for n in (fake_xfs[1] / "calls").read_text().split()]
    assert calls[0] == CAPACITY, "the first try asks for all that df says is free, and fails"
    assert size == CAPACITY and used == filled and free == CAPACITY - filled
    assert free < 64 << 10, "full to the last few blocks"
    assert probe == "refused" and tries == len(calls) <= 400


def test_fill_leaves_what_it_is_asked_to_leave(fake_xfs):
    leave = 8 << 20
    size, used, free, filled, tries, probe = fault.parse_fill(run_fill(fake_xfs, leave).stdout)
    assert leave <= free < leave + (64 << 10)
    assert probe == "accepted", "with 8 MiB left, a 1 MiB write still fits"


def test_a_summary_line_that_is_not_one_is_a_clear_fault():
    with pytest.raises(FxError, match="not its summary line"):
        fault.parse_fill("1 2 3\n")
