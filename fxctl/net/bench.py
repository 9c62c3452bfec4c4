"""`fxctl net bench A B`: RDMA write bandwidth with perftest's ib_write_bw over the RoCE v2 GID.

The server runs on A, the client on B (it connects to A's address on the RDMA link); both write
`--out_json`, whose text is almost JSON: in QoS mode perftest prints an unquoted `sl:` key
(REPORT_FMT_QOS_JSON in perftest_parameters.h), which `parse_perftest_json` quotes before parsing.
"""

from __future__ import annotations

import json
import re

from fxctl.errors import BadInput, FxError
from fxctl.inventory.model import Inventory
from fxctl.net.desired import check_network, interfaces_of
from fxctl.net.verify import check_interface, run_probe
from fxctl.remote.command import script
from fxctl.remote.journal import RunJournal
from fxctl.remote.pool import run_on_hosts

BENCH_PORT = 18516
JSON_FILE = "/tmp/fxctl-ib_write_bw.json"
_BARE_KEY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*):", re.M)

_RUN = r"""command -v ib_write_bw >/dev/null || {
  echo "ib_write_bw is not installed: install the perftest package"; exit 127; }
dev=$1; gid=$2; port=$3; qps=$4; size=$5; secs=$6; file=$7; peer=$8
rm -f "$file"
if [ -n "$peer" ]; then sleep 3; fi
timeout $((secs + 60)) ib_write_bw -d "$dev" -x "$gid" -p "$port" -F --report_gbits -q "$qps" -s "$size" \
  -D "$secs" --out_json --out_json_file="$file" ${peer:+"$peer"} >/dev/null || exit $?
cat "$file"
"""


_BARE_VALUE = re.compile(r'^(\s*"[^"]+"\s*:\s*)([^"{\[\s][^,]*?)\s*(,?)\s*$', re.M)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _value(text: str) -> str:
    try:
        float(text)
        return text
    except ValueError:
        return json.dumps(text)


def parse_perftest_json(text: str) -> dict:
    """perftest's --out_json file as a dict. perftest 4.5 (Debian 12) writes keys and string values bare
    (`test: RDMA_Write_BW_Test,`), pads some keys (`TX_depth :`) and leaves trailing commas; newer
    releases quote most of it but still print a bare `sl:` in QoS mode. Normalise, then parse."""
    fixed = _BARE_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2)}":', text)
    fixed = _BARE_VALUE.sub(lambda m: f"{m.group(1)}{_value(m.group(2))}{m.group(3)}", fixed)
    return json.loads(_TRAILING_COMMA.sub(r"\1", fixed))


def bench(inventory: Inventory, server: str, client: str, *, seconds: int = 5, size: int = 1048576, qps: int = 4,
          journal: RunJournal | None = None) -> dict:
    network = check_network(inventory)
    for name in (server, client):
        if not interfaces_of(network, name):
            raise BadInput(f"{name} has no interface in network.interfaces",
                           "hosts there: " + ", ".join(sorted({s.host for s in network.interfaces})))
    if server == client:
        raise BadInput("server and client must be two different hosts")
    hosts = [inventory.hosts[server], inventory.hosts[client]]
    probes = run_on_hosts(hosts, run_probe, journal=journal)
    rows = {}
    for host in hosts:
        outcome = probes[host.name]
        if not outcome.ok:
            raise FxError(f"{host.name}: {outcome.error}", outcome.hint)
        spec = interfaces_of(network, host.name)[0]
        row = check_interface(host.name, spec, outcome.value["ports"], network.mtu)
        if row["gid_index"] is None:
            raise FxError(f"{host.name} {row['port']}: {row['detail']}",
                          "run `fxctl net apply`, then `fxctl net verify`")
        row["address"] = spec.address.split("/")[0] if spec.address else None
        rows[host.name] = row
    if not rows[server]["address"]:
        raise BadInput(f"{server}'s interface has no address in the inventory: the client cannot reach it")

    def work(session):
        row = rows[session.host.name]
        peer = rows[server]["address"] if session.host.name == client else ""
        return session.run(script(_RUN, row["device"], row["gid_index"], BENCH_PORT, qps, size, seconds,
                                  JSON_FILE, peer), timeout=seconds + 120)

    outcomes = run_on_hosts(hosts, work, journal=journal)
    results = {}
    for host in hosts:
        outcome = outcomes[host.name]
        if not outcome.ok:
            raise FxError(f"{host.name}: {outcome.error}", outcome.hint)
        run = outcome.value
        if run.exit_code == 127:
            raise FxError(f"{host.name}: ib_write_bw is not installed", "install the perftest package "
                          "(Debian/Ubuntu: apt-get install perftest; RHEL: dnf install perftest)")
        if not run.ok:
            raise FxError(f"ib_write_bw failed: {run.describe_failure()}", "see the run journal for both sides")
        results[host.name] = parse_perftest_json(run.stdout)
    report = results[client]["results"]
    return {"server": server, "client": client, "device_server": rows[server]["device"],
            "gid_index_server": rows[server]["gid_index"], "device_client": rows[client]["device"],
            "gid_index_client": rows[client]["gid_index"], "msg_size": report.get("MsgSize"),
            "iterations": report.get("n_iterations"), "bw_peak_gbps": report.get("BW_peak"),
            "bw_avg_gbps": report.get("BW_average"), "msg_rate_mpps": report.get("MsgRate"),
            "test_info": results[client].get("test_info", {}), "server_results": results[server].get("results", {})}
