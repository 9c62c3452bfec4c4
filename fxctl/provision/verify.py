"""Verify a provisioned array on its initiator: controllers live, md complete, XFS geometry, mounted,
and a short sequential O_DIRECT read whose bandwidth is reported."""

from __future__ import annotations

import json
import re

from fxctl.engine.fact import gather_facts
from fxctl.facts.blockdev import Mount
from fxctl.facts.md import MdDetail, md_degraded
from fxctl.facts.nvme_host import NvmeControllers
from fxctl.facts.xfs import XfsGeometry
from fxctl.inventory.model import ArraySpec, Host
from fxctl.ops.raid import XFS_BLOCK
from fxctl.provision import naming
from fxctl.provision.initiator import arrays_of
from fxctl.remote.command import script
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts

READ_MIB = 64

_READ = r"""
dev=$1; mib=$2
if command -v fio >/dev/null; then
  fio --name=fxctl-verify --filename="$dev" --readonly --rw=read --bs=1M --direct=1 --ioengine=libaio \
      --iodepth=16 --size="${mib}M" --output-format=json
else
  dd if="$dev" of=/dev/null bs=1M count="$mib" iflag=direct 2>&1
fi
"""


def parse_read_bandwidth(stdout: str) -> float | None:
    """MB/s from fio's JSON, or from dd's summary line."""
    text = stdout.strip()
    if text.startswith("{") or "\n{" in text:
        data = json.loads(text[text.index("{"):])
        return data["jobs"][0]["read"]["bw_bytes"] / 1e6
    match = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", text)
    if match:
        return int(match.group(1)) / float(match.group(2)) / 1e6
    return None


def check_array(session, array: ArraySpec) -> list[dict]:
    device = naming.md_device(array)
    facts = gather_facts(session, {"controllers": NvmeControllers(),
                                   "md": MdDetail(device, naming.md_uuid_mdadm(array)),
                                   "xfs": XfsGeometry(array.mount), "mount": Mount(array.mount)})
    members = len(array.drives)
    mine = [c for c in facts["controllers"] if c["nqn"] == array.nqn]
    md, xfs, mount = facts["md"], facts["xfs"] or {}, facts["mount"]
    sunit = array.chunk_bytes // XFS_BLOCK
    checks = [
        ("controller live", bool(mine) and all(c["state"] == "live" for c in mine),
         ", ".join(f"{c['name']} {c['state']} {c['transport']}" for c in mine) or "not connected"),
        ("md complete", bool(md) and md["level"] == "raid0" and len(md["members"]) == members
         and md["chunk_bytes"] == array.chunk_bytes and not md_degraded(md),
         f"{md['level']} {len(md['members'])}/{members} members, chunk {md['chunk_bytes']}"
         + (f"; DEGRADED: {md_degraded(md)}" if md_degraded(md) else "") if md else "absent"),
        ("xfs geometry", xfs.get("sunit") == sunit and xfs.get("swidth") == sunit * members,
         f"sunit={xfs.get('sunit')} swidth={xfs.get('swidth')} (want {sunit}/{sunit * members}) blocks"),
        ("mounted", bool(mount) and mount["fstype"] == "xfs", f"{mount['source']} on {mount['target']}"
         if mount else "not mounted"),
    ]
    if array.multipath:
        checks.append(paths_check(array, mine))
    result = session.run(script(_READ, device, READ_MIB), timeout=300)
    bandwidth = parse_read_bandwidth(result.stdout) if result.ok else None
    checks.append(("sequential read", bandwidth is not None,
                   f"{bandwidth:.1f} MB/s O_DIRECT over {READ_MIB} MiB" if bandwidth else result.tail(3)))
    return [{"array": array.name, "check": name, "ok": ok, "detail": detail,
             **({"read_mb_s": round(bandwidth, 1)} if name == "sequential read" and bandwidth else {})}
            for name, ok, detail in checks]


USABLE_ANA = ("optimized", "non-optimized")


def paths_check(array: ArraySpec, controllers: list[dict]) -> tuple[str, bool, str]:
    """Every path of a multipath array has a live controller whose namespaces' ANA states are usable;
    one that has not is named (the array still works over the others: degraded, not down)."""
    parts, ok = [], True
    for index, path in enumerate(array.listen_paths, start=1):
        found = [c for c in controllers if c["address"].get("traddr") == path.address
                 and c["address"].get("trsvcid") == str(path.port)]
        live = [c for c in found if c["state"] == "live"]
        states = sorted(set((live[0].get("ana") or {}).values())) if live else []
        usable = bool(live) and len(live[0].get("ana") or {}) == len(array.drives) and \
            all(s in USABLE_ANA for s in states)
        ok = ok and usable
        said = ", ".join(f"{c['name']} {c['state']}" for c in found) or "not connected"
        ana = f" (ANA {'/'.join(states) or 'none'} on {len(live[0].get('ana') or {})} namespaces)" if live else ""
        parts.append(f"path {index} {path.label}: {said}{ana}" + ("" if usable else " DEGRADED"))
    return "paths", ok, "; ".join(parts)


def verify_arrays(hosts: list[Host], arrays: tuple[ArraySpec, ...], journal: RunJournal | None) -> list[dict]:
    def work(session):
        return [c for a in arrays_of(arrays, session.host) for c in check_array(session, a)]

    outcomes = run_on_hosts(hosts, work, journal=journal)
    rows = []
    for host in hosts:
        outcome = outcomes[host.name]
        if outcome.ok:
            rows += [{"host": host.name, **check} for check in outcome.value]
        else:
            rows.append({"host": host.name, "array": "-", "check": "reachable", "ok": False, "detail": outcome.error})
    return rows
