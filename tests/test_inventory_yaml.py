"""YAML features an inventory may use, read as PyYAML's safe loader reads them (anchors, aliases, merge keys),
with every key's line kept; and values a command would refuse or that would harm a host, refused by
`fxctl inventory check` before anything runs (issue 27 #5)."""

from __future__ import annotations

import pytest
import yaml

from fxctl.inventory import InventoryInvalid, load_inventory_text
from fxctl.inventory.source import parse_yaml

MERGED = """\
version: 1
defaults: &defaults
  user: root
  connect_timeout: 7
base: &gpu
  address: 192.0.2.10
  roles: [initiator]
extra: &extra
  port: 2222
  user: admin
hosts:
  t1: {address: 192.0.2.1, roles: [target]}
  i1:
    <<: *gpu
    address: 192.0.2.2
  i2:
    <<: [*gpu, *extra]
    address: 192.0.2.3
"""


def test_anchors_aliases_and_merge_keys_read_as_pyyaml_reads_them():
    doc = parse_yaml(MERGED, "inv.yaml")
    assert doc.data == yaml.safe_load(MERGED)
    assert doc.data["hosts"]["i1"] == {"address": "192.0.2.2", "roles": ["initiator"]}   # own key wins
    assert doc.data["hosts"]["i2"] == {"address": "192.0.2.3", "roles": ["initiator"], "port": 2222,
                                       "user": "admin"}
    # lines: an own key where it is written; a merged key where the anchored mapping writes it
    assert doc.lines[("hosts", "i1", "address")] == 15
    assert doc.lines[("hosts", "i1", "roles")] == 7
    assert doc.lines[("hosts", "i2", "port")] == 9
    assert doc.duplicates == []


def test_of_two_merged_mappings_the_earlier_wins_as_the_yaml_merge_spec_says():
    """yaml.org/type/merge: keys of mappings earlier in the sequence override later ones. (PyYAML 6.0.4 gets
    this right only for one-character keys: it de-duplicates merged keys by the identity of their string.)"""
    doc = parse_yaml("a: &a {roles: [initiator]}\nb: &b {roles: [server], port: 2}\nc: {<<: [*a, *b]}\n", "x")
    assert doc.data["c"] == {"roles": ["initiator"], "port": 2}


def test_a_problem_in_a_merged_key_names_the_line_it_is_written_on():
    text = ("version: 1\nhosts:\n  t1: &t\n    address: 192.0.2.1\n    roles: [servr]\n"
            "  i1:\n    <<: *t\n    address: 192.0.2.2\n")
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(text, "inv.yaml")
    assert [str(p) for p in info.value.problems] == [
        "inv.yaml:5: hosts.i1.roles[0]: 'servr' is not allowed; one of: target, initiator, server, client",
        "inv.yaml:5: hosts.t1.roles[0]: 'servr' is not allowed; one of: target, initiator, server, client"]


def test_a_merge_key_of_a_scalar_is_refused_with_its_line():
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text("version: 1\nhosts:\n  a:\n    <<: 5\n    address: 192.0.2.1\n", "inv.yaml")
    assert [str(p) for p in info.value.problems] == [
        "inv.yaml:4: hosts.a: invalid YAML: a merge key (<<) takes a mapping or a list of mappings"]


def test_a_merge_cycle_is_refused():
    text = "version: 1\nhosts:\n  a: &a\n    address: 192.0.2.1\n    sub:\n      <<: *a\n"
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(text, "inv.yaml")
    assert "cycle" in str(info.value.problems[0])


ARRAY = """\
version: 1
hosts:
  t1: {address: 192.0.2.1, roles: [target]}
  i1: {address: 192.0.2.2, roles: [initiator]}
arrays:
  - name: kv
    target: t1
    initiators: [i1]
    nqn: nqn.2026-11.io.fxctl:kv
    listen: {address: 198.51.100.1, port: 4420}
    drives: [{serial: SN1}, {serial: SN2}]
    filesystem: FS
"""


@pytest.mark.parametrize("fs,expected", [
    ("{mount: /usr}", "inv.yaml:12: arrays[0].filesystem.mount: '/usr' would cover a directory the system lives "
                      "in (mounting hides what is there); use a folder of its own such as /mnt/kvtier"),
    ("{mount: /var/lib}", "inv.yaml:12: arrays[0].filesystem.mount: '/var/lib' would cover a directory the system "
                          "lives in (mounting hides what is there); use a folder of its own such as /mnt/kvtier"),
    ("{mount: /etc/kv}", "inv.yaml:12: arrays[0].filesystem.mount: '/etc/kv' would cover a directory the system "
                         "lives in (mounting hides what is there); use a folder of its own such as /mnt/kvtier"),
    ("{mount: /mnt/kv, label: kvtier-array-1}",
     "inv.yaml:12: arrays[0].filesystem.label: 'kvtier-array-1' is longer than 12 characters, the most an XFS "
     "label holds (mkfs.xfs -L)"),
    ("{mount: /mnt/kv, options: [noatime, logbsize=512k]}",
     "inv.yaml:12: arrays[0].filesystem.options[1]: 'logbsize=512k' logbsize must be a power of two from 16k "
     "to 256k, such as 256k"),
    ("{mount: /mnt/kv, options: [noatime, logbufs=9]}",
     "inv.yaml:12: arrays[0].filesystem.options[1]: 'logbufs=9' logbufs must be an integer from 2 to 8"),
    ("{mount: /mnt/kv, options: [noatime, nobarrier]}",
     "inv.yaml:12: arrays[0].filesystem.options[1]: 'nobarrier' is not an XFS mount option (see `man 5 xfs`)"),
])
def test_values_mkfs_or_mount_would_refuse_or_that_harm_a_host_are_refused(fs, expected):
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(ARRAY.replace("FS", fs), "inv.yaml")
    assert [str(p) for p in info.value.problems] == [expected]


@pytest.mark.parametrize("fs", ["{mount: /mnt/kvtier}", "{mount: /data/kv, label: kvtier}",
                                "{mount: /var/lib/kvtier, options: [noatime, logbsize=64k, x-systemd.automount]}"])
def test_good_filesystems_pass(fs):
    inventory = load_inventory_text(ARRAY.replace("FS", fs), "inv.yaml")
    assert inventory.arrays[0].mount.startswith("/")
