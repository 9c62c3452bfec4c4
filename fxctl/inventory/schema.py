"""The inventory's schema: hosts and the desired-state sections (arrays, network, serve)."""

from __future__ import annotations

from fxctl.inventory import validators as v
from fxctl.inventory.spec import Checked, Field, ListOf, MapOf, OneOf, Scalar, Struct

ROLES = ("target", "initiator", "server", "client")
TRANSPORTS = ("rdma", "tcp")
NIC_DRIVERS = ("auto", "dcb", "mlx5", "bnxt")

STR = Scalar(str)
PORT = Scalar(int, minimum=1, maximum=65535)
SECONDS = Scalar(int, minimum=0, maximum=86400)
PRIORITY = Scalar(int, minimum=0, maximum=7)
DSCP = Scalar(int, minimum=0, maximum=63)

HOST_FIELDS = {
    "address": Field(Scalar(str, v.host_address), doc="management address (SSH)"),
    "port": Field(PORT, doc="SSH port"),
    "user": Field(Scalar(str, v.user), doc="SSH user"),
    "key": Field(STR, doc="private key file"),
    "host_key": Field(Scalar(str, v.host_key), doc="pinned host key: public key line or SHA256 fingerprint"),
    "known_hosts": Field(STR, doc="known_hosts file used to verify the host key"),
    "sudo": Field(Scalar(bool), doc="run commands through sudo -n"),
    "connect_timeout": Field(Scalar(int, minimum=1, maximum=600), doc="seconds"),
    "roles": Field(ListOf(OneOf(ROLES), unique=True), doc="target, initiator, server, client"),
    "hostnqn": Field(Scalar(str, v.nqn), doc="NVMe host NQN for this initiator"),
    "hostid": Field(Scalar(str, v.name), doc="NVMe host ID (UUID)"),
    "vars": Field(MapOf(Scalar(str, v.name), STR), doc="free-form labels, never sent to commands"),
}
DEFAULT_FIELDS = {k: f for k, f in HOST_FIELDS.items()
                  if k in ("port", "user", "key", "known_hosts", "sudo", "connect_timeout")}

DRIVE = Struct({
    "serial": Field(Checked(v.serial)),
    "by_id": Field(Scalar(str, v.by_id_path)),
}, exclusive=(("serial", "by_id"),))

CONNECT = Struct({
    "nr_io_queues": Field(Scalar(int, minimum=1, maximum=1024)),
    "queue_size": Field(Scalar(int, minimum=16, maximum=1024)),
    "keep_alive_tmo": Field(SECONDS),
    "ctrl_loss_tmo": Field(Scalar(int, minimum=-1, maximum=86400)),
    "reconnect_delay": Field(SECONDS),
    "fast_io_fail_tmo": Field(Scalar(int, minimum=-1, maximum=86400)),
    "tos": Field(Scalar(int, minimum=-1, maximum=255)),
})

ARRAY = Struct({
    "name": Field(Scalar(str, v.name), required=True),
    "target": Field(Scalar(str, v.name), required=True, doc="host that exports the drives"),
    "nqn": Field(Scalar(str, v.nqn), required=True, doc="subsystem NQN"),
    "transport": Field(OneOf(TRANSPORTS)),
    "listen": Field(Struct({"address": Field(Scalar(str, v.ip_address), required=True),
                            "port": Field(PORT)}), required=True),
    "drives": Field(ListOf(DRIVE, min_items=1), required=True),
    "initiators": Field(ListOf(Scalar(str, v.name), min_items=1, unique=True), required=True),
    "connect": Field(CONNECT),
    "raid": Field(Struct({"chunk": Field(Checked(v.size)), "metadata": Field(OneOf(("1.2",))),
                          "name": Field(Scalar(str, v.name))})),
    "filesystem": Field(Struct({
        "type": Field(OneOf(("xfs",))),
        "label": Field(Scalar(str, v.name)),
        "mount": Field(Scalar(str, v.mount_point), required=True),
        "options": Field(ListOf(Scalar(str, v.mount_option), unique=True)),
    }), required=True),
})

INTERFACE = Struct({
    "netdev": Field(Scalar(str, v.ifname)),
    "rdma_device": Field(Scalar(str, v.rdma_device)),
    "address": Field(Scalar(str, v.ip_interface)),
    "soft_roce": Field(Scalar(bool), doc="create a Soft-RoCE (rxe) device on the netdev"),
})

NETWORK = Struct({
    "driver": Field(OneOf(NIC_DRIVERS)),
    "pfc_priority": Field(PRIORITY),
    "dscp_map": Field(MapOf(DSCP, PRIORITY)),
    "trust": Field(OneOf(("dscp", "pcp"))),
    "ets": Field(ListOf(Scalar(int, minimum=0, maximum=100))),
    "ecn": Field(Scalar(bool)),
    "cnp": Field(Struct({"dscp": Field(DSCP), "priority": Field(PRIORITY)})),
    "roce_tos": Field(Scalar(int, minimum=0, maximum=255)),
    "mtu": Field(Scalar(int, minimum=1280, maximum=9216)),
    "global_pause": Field(Scalar(bool)),
    "interfaces": Field(MapOf(Scalar(str, v.name), ListOf(INTERFACE, min_items=1)), required=True),
})

SERVE = Struct({
    "hosts": Field(ListOf(Scalar(str, v.name), min_items=1, unique=True), required=True),
    "profile": Field(Scalar(str, v.name)),
    "engine": Field(OneOf(("vllm", "sim"))),
    "model": Field(Scalar(str, v.model)),
    "tensor_parallel": Field(Scalar(int, minimum=1, maximum=64)),
    "instances": Field(Scalar(int, minimum=1, maximum=64)),
    "port": Field(PORT),
    "max_num_seqs": Field(Scalar(int, minimum=1, maximum=4096)),
    "l1_size": Field(Checked(v.size)),
    "l2_size": Field(Checked(v.size)),
    "l2_dir": Field(Scalar(str, v.mount_point)),
    "python": Field(STR, doc="python interpreter of the serving environment"),
})

INVENTORY = Struct({
    "version": Field(OneOf((1,)), required=True),
    "defaults": Field(Struct(DEFAULT_FIELDS)),
    "hosts": Field(MapOf(Scalar(str, v.name), Struct({**HOST_FIELDS,
                   "address": Field(Scalar(str, v.host_address), required=True)})), required=True),
    "groups": Field(MapOf(Scalar(str, v.name), ListOf(Scalar(str, v.name), unique=True))),
    "arrays": Field(ListOf(ARRAY)),
    "network": Field(NETWORK),
    "serve": Field(SERVE),
    "lab": Field(MapOf(Scalar(str, v.name), Checked(lambda _v: None)), doc="facts written by fxctl lab"),
})
