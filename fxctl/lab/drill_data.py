"""Data for a fault drill: written and checksummed before the fault, read sequentially during it, checked after.

A drill writes SIZE MiB of random data into DIR on a guest (fsync'ed, sha256 taken from a direct re-read),
starts a sequential O_DIRECT read of it in the background and, beside it, a writer that copies another
WRITE_MIB of random data (kept in the guest's RAM, its sha256 taken there) into DIR over and over with
O_DIRECT and fsync (the I/O the fault interrupts, both ways). Afterwards it waits for both (bounded) and
reads both files again: each loop's exit status and error, and whether each sha256 still matches. Reads
go around the page cache, so they show what the array holds.
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
WRITTEN_NAME = ".fxctl-drill-written.bin"   # what the writer copies during the fault
WRITE_MIB = 4
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
    writer: dict = field(default_factory=dict)      # exit_code, error, seconds, passes (writes during it)
    written_sha256: str | None = None               # of what the writer wrote (taken in the guest's RAM)
    written_sha256_after: str | None = None         # of the written file read back after the fault

    @property
    def intact(self) -> bool:
        return self.sha256_after == self.sha256

    @property
    def writes_intact(self) -> bool | None:
        """The data written during the fault reads back as written (None: no writer ran)."""
        if not self.writer:
            return None
        return self.written_sha256 is not None and self.written_sha256_after == self.written_sha256

    def to_dict(self) -> dict:
        return {"guest": self.guest, "path": self.path, "size_mib": self.size_mib, "sha256": self.sha256,
                "reader": self.reader, "sha256_after": self.sha256_after, "error_after": self.error_after,
                "intact": self.intact, "writer": self.writer, "written_sha256": self.written_sha256,
                "written_sha256_after": self.written_sha256_after, "writes_intact": self.writes_intact}


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

# reads the file again and again until finish() leaves $run.stop: the read is on when the fault strikes;
# beside it, the writer copies $run.src (random, in RAM) into the folder again and again, fsync'ed
_START_IO = r"""
f=$1/$2; run=$3; limit=$4; w=$1/$5; mib=$6
rm -f "$run.rc" "$run.err" "$run.stop" "$run.wrc" "$run.werr" "$run.src" "$run.src.sha256"
head -c "$((mib * 1048576))" /dev/urandom > "$run.src" || exit 1
sha256sum < "$run.src" | cut -d' ' -f1 > "$run.src.sha256"
nohup sh -c 'start=$(date +%s); rc=0; passes=0
while [ ! -e "$2.stop" ]; do
  timeout "$3" dd if="$1" of=/dev/null bs=1M iflag=direct status=none 2>"$2.err" || { rc=$?; break; }
  passes=$((passes + 1))
done
echo "$rc $(($(date +%s) - start)) $passes" > "$2.rc"' fxctl "$f" "$run" "$limit" </dev/null >/dev/null 2>&1 &
nohup sh -c 'start=$(date +%s); rc=0; passes=0
while [ ! -e "$2.stop" ]; do
  timeout "$3" dd if="$2.src" of="$1" bs=1M oflag=direct conv=fsync status=none 2>"$2.werr" || { rc=$?; break; }
  passes=$((passes + 1)); sleep 0.5
done
echo "$rc $(($(date +%s) - start)) $passes" > "$2.wrc"' fxctl "$w" "$run" "$limit" </dev/null >/dev/null 2>&1 &
cat "$run.src.sha256"
"""

_IO_STATUS = r"""
run=$1
touch "$run.stop"
for k in rc wrc; do test -e "$run.$k" || { echo running; exit 0; }; done
cat "$run.rc"; cat "$run.wrc"; head -c 300 "$run.err" 2>/dev/null | tr '\n' ' '; echo
head -c 300 "$run.werr" 2>/dev/null | tr '\n' ' '; echo
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


def start_io(state: LabState, guest: GuestRecord, data: DrillData, limit_s: float) -> None:
    """In the background on the guest until finish(): sequential direct reads of the data, over and over,
    and writes of WRITE_MIB of other random data (fsync'ed); one read or write that takes longer than
    limit_s is ended (exit 124)."""
    folder = data.path.rsplit("/", 1)[0]
    with open_session(guest_host(state, guest)) as session:
        result = session.run(script(_START_IO, folder, DATA_NAME, RUN_PREFIX, str(int(limit_s)), WRITTEN_NAME,
                                    str(WRITE_MIB)), timeout=60, check=True)
    digest = result.stdout.strip()
    data.written_sha256 = digest if len(digest) == 64 else None


def finish(state: LabState, guest: GuestRecord, data: DrillData, *, wait_s: float) -> DrillData:
    """Wait (at most wait_s) for the background read, then read the data again and compare checksums."""
    folder = data.path.rsplit("/", 1)[0]
    with open_session(guest_host(state, guest)) as session:
        def both_done() -> tuple[dict, dict] | None:
            lines = session.run(script(_IO_STATUS, RUN_PREFIX), timeout=30).stdout.splitlines()
            if not lines or lines[0] == "running" or len(lines) < 2:
                return None
            lines += ["", ""]
            return parse_loop(lines[0], lines[2]), parse_loop(lines[1], lines[3])

        done = poll(both_done, wait_s, every_s=2)
        still = {"exit_code": None, "seconds": None, "error": f"still running after {wait_s:.0f} s"}
        data.reader, data.writer = done or (still, still)
        check = session.run(script(_CHECK, folder, DATA_NAME, str(IO_TIMEOUT_S), RUN_PREFIX), timeout=IO_TIMEOUT_S + 30)
        written = session.run(script(_CHECK, folder, WRITTEN_NAME, str(IO_TIMEOUT_S), RUN_PREFIX),
                              timeout=IO_TIMEOUT_S + 30)
    digest = check.stdout.strip()
    data.sha256_after = digest if len(digest) == 64 and check.ok else None
    if data.sha256_after is None:
        data.error_after = (check.stderr.strip()[-300:] or "the read timed out")
    digest = written.stdout.strip()
    data.written_sha256_after = digest if len(digest) == 64 and written.ok else None
    return data


def parse_loop(status: str, error: str) -> dict:
    """One background loop's "RC SECONDS PASSES" line and its error text."""
    code, seconds, passes = (status.split() + ["", "", ""])[:3]
    return {"exit_code": int(code) if code.lstrip("-").isdigit() else None, "seconds": _float(seconds),
            "passes": int(passes) if passes.isdigit() else 0, "error": error.strip() or None}


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
    start_io(state, guest, data, read_limit_s)
    progress(f"{guest.name}: sha256 {data.sha256[:16]}...; sequential read and {WRITE_MIB} MiB writes started")
    result = fault()
    progress(f"{guest.name}: waiting for the read (at most {read_limit_s:.0f} s), then checking the data")
    return result, finish(state, guest, data, wait_s=read_limit_s)
