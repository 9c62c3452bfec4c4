"""Facts of an NVMe-oF initiator: its identity and the fabric controllers it has (from sysfs)."""

from __future__ import annotations

from fxctl.engine.fact import Fact
from fxctl.remote.command import script

TIMEOUTS = ("ctrl_loss_tmo", "reconnect_delay", "fast_io_fail_tmo")  # path-loss timeouts in sysfs (5.11+)


class NvmeControllers(Fact):
    """Every NVMe controller: name, subsystem NQN, state, transport, address, path-loss timeouts and, under
    native multipath, the ANA state of each of its namespace paths ({"nvme0c1n1": "optimized"}) (sysfs,
    not nvme-cli). A timeout reads as its sysfs text ("off" for -1), or None where this kernel lacks it."""

    def command(self):
        return script(r"""for c in /sys/class/nvme/nvme*; do
test -d "$c" || continue
printf '%s' "${c##*/}"
for a in subsysnqn state transport address; do printf '\t%s' "$(cat "$c/$a" 2>/dev/null | tr '\n' ' ')"; done
for a in ctrl_loss_tmo reconnect_delay fast_io_fail_tmo; do
  if test -e "$c/$a"; then printf '\t%s' "$(cat "$c/$a" 2>/dev/null)"; else printf '\t-'; fi
done
printf '\t'
for n in "$c"/nvme*c*n*; do test -e "$n/ana_state" && printf '%s=%s ' "${n##*/}" "$(cat "$n/ana_state")"; done
echo; done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> list[dict]:
        controllers = []
        for line in stdout.splitlines():
            fields = line.split("\t")
            if len(fields) < 5:
                continue
            name, nqn, state, transport, address = (f.strip() for f in fields[:5])
            timeouts = [f.strip() for f in fields[5:8]]
            ana = dict(item.split("=", 1) for item in (fields[8] if len(fields) > 8 else "").split() if "=" in item)
            controllers.append({"name": name, "nqn": nqn, "state": state, "transport": transport,
                                "address": parse_address(address),
                                **{key: (None if value == "-" else value) for key, value in zip(TIMEOUTS, timeouts)},
                                "ana": ana})
        return controllers


def parse_address(text: str) -> dict[str, str]:
    """'traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.2' -> dict."""
    pairs = (item.split("=", 1) for item in text.replace(" ", ",").split(",") if "=" in item)
    return {key: value for key, value in pairs}


class UuidMembers(Fact):
    """The NVMe namespaces this host sees by UUID: /dev/disk/by-id/nvme-uuid.* names."""

    def command(self):
        return script(r"""for l in /dev/disk/by-id/nvme-uuid.*; do test -e "$l" && echo "$l"; done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> list[str]:
        return sorted(line.strip() for line in stdout.splitlines() if line.strip())


class NvmeConnectOptions(Fact):
    """The long options this host's `nvme connect` accepts (nvme-cli releases differ)."""

    ok_codes = (0, 1, 22)  # older releases exit non-zero on --help

    def command(self):
        return script("nvme connect --help 2>&1; true")

    def parse(self, stdout: str, exit_code: int = 0) -> list[str]:
        import re

        return sorted(set(re.findall(r"\[\s+(--[A-Za-z0-9_-]+)", stdout)))


class NvmeMultipath(Fact):
    """Native multipath on this host: whether nvme_core has it on (its `multipath` parameter: None where
    the module is not loaded), the kernel's release (which I/O policies it has), and each NVMe subsystem's
    I/O policy by subsystem NQN (sysfs /sys/class/nvme-subsystem)."""

    def command(self):
        return script(r"""printf 'multipath\t%s\n' "$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)"
printf 'kernel\t%s\n' "$(uname -r)"
for s in /sys/class/nvme-subsystem/nvme-subsys*; do
  test -d "$s" || continue
  printf 'subsystem\t%s\t%s\t%s\n' "${s##*/}" "$(cat "$s/subsysnqn" 2>/dev/null)" "$(cat "$s/iopolicy" 2>/dev/null)"
done; true""")

    def parse(self, stdout: str, exit_code: int = 0) -> dict:
        found: dict = {"enabled": None, "kernel": "", "subsystems": {}}
        for line in stdout.splitlines():
            fields = [f.strip() for f in line.split("\t")]
            if fields[0] == "multipath" and len(fields) > 1 and fields[1]:
                found["enabled"] = fields[1] in ("Y", "y", "1")
            elif fields[0] == "kernel" and len(fields) > 1:
                found["kernel"] = fields[1]
            elif fields[0] == "subsystem" and len(fields) == 4 and fields[2]:
                found["subsystems"][fields[2]] = {"name": fields[1], "iopolicy": fields[3] or None}
        return found
