"""Every validator matches the whole value: a trailing newline (which a regex `$` lets through) is refused."""

from __future__ import annotations

import pytest

from fxctl.inventory import validators as v

GOOD = [
    (v.nqn, "nqn.2026-11.io.fxctl:kv"), (v.ip_address, "198.51.100.1"), (v.ip_address, "fe80::1%eth0"),
    (v.ip_interface, "198.51.100.11/24"), (v.host_address, "gpu1.example.com"), (v.host_address, "192.0.2.1"),
    (v.ifname, "eth0"), (v.rdma_device, "mlx5_0"), (v.by_id_path, "/dev/disk/by-id/nvme-x"), (v.serial, "SN1"),
    (v.name, "kv"), (v.user, "root"), (v.mount_point, "/mnt/kv"), (v.mount_option, "logbsize=256k"),
    (v.model, "Qwen/Qwen3-8B"), (v.host_key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB comment"),
    (v.host_key, "SHA256:" + "A" * 43), (v.size, "64K"), (v.md_chunk, "64K"),
]


@pytest.mark.parametrize("validator,value", GOOD, ids=[f"{f.__name__}:{x}" for f, x in GOOD])
def test_validator_refuses_a_trailing_newline(validator, value):
    assert validator(value) is None
    assert validator(value + "\n") is not None
    assert validator(value + "\r\n") is not None


@pytest.mark.parametrize("value", ["12345", "1.2.3", "10.0.0.256", "0x7f.1"])
def test_numeric_names_are_not_host_addresses(value):
    assert v.host_address(value) is not None


@pytest.mark.parametrize("value,ok", [(4096, True), ("4K", True), ("64M", True), ("128M", False), (0, False),
                                      (1000, False), ("1.5K", False), ("48K", False), ("1T", False)])
def test_md_chunk_is_a_power_of_two_from_4k_to_64m(value, ok):
    assert (v.md_chunk(value) is None) == ok
