"""Data for a fault drill: written and checksummed before the fault, read sequentially during it, checked after.

A drill writes SIZE MiB of random data into DIR on a guest (fsync'ed, sha256 taken from a direct re-read),
starts a sequential O_DIRECT read of it in the background (the I/O the fault interrupts), and afterwards
waits for that read (bounded) and reads the file again: its exit status and error, and whether the
sha256 still matches. Reads go around the page cache, so they show what the array holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fxctl.errors import BadInput, FxError
from fxctl.lab.access import guest_host
from fxctl.lab.state import GuestRecord, LabState
from fxctl.poll import poll
from fxctl.remote.command import script
from fxctl.remote.session import open_session

DATA_NAME = ".fxctl-drill.bin"
RUN_PREFIX = "/run/fxctl-drill"     # the reader's status lives in the guest's RAM, never on the array
IO_TIMEOUT_S = 180


@dataclass
class DrillData:
    guest: str
    path: str
    size_mib: int
    sha256: str
    reader: dict = field(default_factory=dict)      # exit_code, error, seconds (the read during the fault)
    sha256_after: str | None = None
    error_after: str | None = None

    @property
    def intact(self) -> bool:
        return self.sha256_after == self.sha256

    def to_dict(self) -> dict:
        return {"guest": self.guest, "path": self.path, "size_mib": self.size_mib, "sha256": self.sha256,
                "reader": self.reader, "sha256_after": self.sha256_after, "error_after": self.error_after,
                "intact": self.intact}


def parse_target(text: str, state: LabState) -> tuple[GuestRecord, str]:
    """'GUEST:/DIR' -> (guest, dir); BadInput naming what is allowed."""
    name, sep, folder = text.partition(":")
    if not sep or not folder.startswith("/") or "\n" in folder:
        raise BadInput(f"--data must be GUEST:/DIR (a folder on a guest, e.g. initiator1:/mnt/kvtier), not {text!r}")
    guest = state.guest(name)
    if guest is None:
        raise BadInput(f"--data: lab {state.name} has no guest {name!r}",
                       f"guests: {', '.join(g.name for g in state.guests)}")
    return guest, folder.rstrip("/") or "/"


_WRITE = r"""
f=$1/$2; mib=$3
mountpoint -q "$1" || { echo "$1 is not a mount point" >&2; exit 3; }
head -c "$((mib * 1048576))" /dev/urandom | dd of="$f" bs=1M iflag=fullblock oflag=direct conv=fsync status=none \
  || exit 1
dd if="$f" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1 | tee "$4.sha256"
"""

# reads the file again and again until finish() leaves $run.stop: the read is on when the fault strikes
_START_READ = r"""
f=$1/$2; run=$3; limit=$4
rm -f "$run.rc" "$run.err" "$run.stop"
nohup sh -c 'start=$(date +%s); rc=0; passes=0
while [ ! -e "$2.stop" ]; do
  timeout "$3" dd if="$1" of=/dev/null bs=1M iflag=direct status=none 2>"$2.err" || { rc=$?; break; }
  passes=$((passes + 1))
done
echo "$rc $(($(date +%s) - start)) $passes" > "$2.rc"' fxctl "$f" "$run" "$limit" </dev/null >/dev/null 2>&1 &
"""

_READ_STATUS = r"""
run=$1
touch "$run.stop"
test -e "$run.rc" || { echo running; exit 0; }
cat "$run.rc"; head -c 400 "$run.err" 2>/dev/null
"""

_CHECK = r"""
f=$1/$2; limit=$3; run=$4
{ timeout "$limit" dd if="$f" bs=1M iflag=direct status=none 2>"$run.cerr" || echo "read failed (exit $?)" >>"$run.cerr"
} | sha256sum | cut -d' ' -f1
if [ -s "$run.cerr" ]; then cat "$run.cerr" >&2; exit 1; fi
"""


def write(state: LabState, guest: GuestRecord, folder: str, size_mib: int) -> DrillData:
    """Write the drill's data and take its checksum (bounded); FxError with the guest's words if it fails."""
    if not 1 <= size_mib <= 4096:
        raise BadInput(f"--data-mib must be 1..4096, not {size_mib}")
    with open_session(guest_host(state, guest)) as session:
        result = session.run(script(_WRITE, folder, DATA_NAME, str(size_mib), RUN_PREFIX), timeout=IO_TIMEOUT_S)
    digest = result.stdout.strip()
    if not result.ok or len(digest) != 64:
        raise FxError(f"{guest.name}: could not write the drill's data into {folder}: "
                      f"{(result.stderr or result.stdout).strip()[-300:] or 'timed out'}")
    return DrillData(guest.name, f"{folder}/{DATA_NAME}", size_mib, digest)


def start_reading(state: LabState, guest: GuestRecord, data: DrillData, limit_s: float) -> None:
    """Sequential direct reads of the data in the background on the guest, over and over until finish();
    one read that takes longer than limit_s is ended (exit 124)."""
    folder = data.path.rsplit("/", 1)[0]
    with open_session(guest_host(state, guest)) as session:
        session.run(script(_START_READ, folder, DATA_NAME, RUN_PREFIX, str(int(limit_s))), timeout=60, check=True)


def finish(state: LabState, guest: GuestRecord, data: DrillData, *, wait_s: float) -> DrillData:
    """Wait (at most wait_s) for the background read, then read the data again and compare checksums."""
    folder = data.path.rsplit("/", 1)[0]
    with open_session(guest_host(state, guest)) as session:
        def reader_done() -> dict | None:
            lines = session.run(script(_READ_STATUS, RUN_PREFIX), timeout=30).stdout.strip().splitlines()
            if not lines or lines[0] == "running":
                return None
            code, seconds, passes = (lines[0].split() + ["", ""])[:3]
            return {"exit_code": int(code), "seconds": _float(seconds), "passes": int(passes or 0),
                    "error": " ".join(lines[1:]).strip() or None}

        data.reader = poll(reader_done, wait_s, every_s=2) or \
            {"exit_code": None, "seconds": None, "error": f"still reading after {wait_s:.0f} s"}
        check = session.run(script(_CHECK, folder, DATA_NAME, str(IO_TIMEOUT_S), RUN_PREFIX), timeout=IO_TIMEOUT_S + 30)
    digest = check.stdout.strip()
    data.sha256_after = digest if len(digest) == 64 and check.ok else None
    if data.sha256_after is None:
        data.error_after = (check.stderr.strip()[-300:] or "the read timed out")
    return data


def check(state: LabState, guest: GuestRecord, folder: str) -> DrillData:
    """Read the last drill's data in `folder` again and compare it with the sha256 recorded when it was
    written (kept in the guest's /run: gone when that guest reboots)."""
    with open_session(guest_host(state, guest)) as session:
        recorded = session.run(script('cat "$1.sha256"', RUN_PREFIX), timeout=30)
        digest = recorded.stdout.strip()
        if not recorded.ok or len(digest) != 64:
            raise FxError(f"{guest.name}: no drill data recorded (no {RUN_PREFIX}.sha256)",
                          "write it with a fault's --data first (the record is lost when the guest reboots)")
        size = session.run(script('stat -c %s "$1/$2"', folder, DATA_NAME), timeout=30).stdout.strip()
        data = DrillData(guest.name, f"{folder}/{DATA_NAME}", int(size) >> 20 if size.isdigit() else 0, digest)
        read = session.run(script(_CHECK, folder, DATA_NAME, str(IO_TIMEOUT_S), RUN_PREFIX), timeout=IO_TIMEOUT_S + 30)
    data.sha256_after = read.stdout.strip() if read.ok and len(read.stdout.strip()) == 64 else None
    if data.sha256_after is None:
        data.error_after = read.stderr.strip()[-300:] or "the read timed out"
    return data


def _float(text: str) -> float | None:
    try:
        return round(float(text), 1)
    except ValueError:
        return None


def around(state: LabState, where: str | None, size_mib: int, fault, *, read_limit_s: float,
           progress) -> tuple[object, DrillData | None]:
    """Run `fault()` between writing the drill's data (and starting its read) and checking it again.
    Without `where` the fault runs alone."""
    if where is None:
        return fault(), None
    guest, folder = parse_target(where, state)
    progress(f"{guest.name}: writing {size_mib} MiB into {folder} and taking its sha256")
    data = write(state, guest, folder, size_mib)
    progress(f"{guest.name}: sha256 {data.sha256[:16]}...; sequential read started")
    start_reading(state, guest, data, read_limit_s)
    result = fault()
    progress(f"{guest.name}: waiting for the read (at most {read_limit_s:.0f} s), then checking the data")
    return result, finish(state, guest, data, wait_s=read_limit_s)
