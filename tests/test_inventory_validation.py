"""A table of bad inventories, each with its exact expected problem (file:line: key: message)."""

from __future__ import annotations

import textwrap

import pytest

from fxctl.inventory import InventoryInvalid, load_inventory, load_inventory_text

GOOD_HOSTS = """\
version: 1
hosts:
  t1: {address: 192.0.2.1, roles: [target]}
  i1: {address: 192.0.2.2, roles: [initiator]}
"""

ARRAY = """\
arrays:
  - name: kv
    target: t1
    nqn: nqn.2026-11.io.fxctl:kv
    listen: {address: 198.51.100.1, port: 4420}
    drives: [{serial: SN1}, {serial: SN2}]
    initiators: [i1]
    filesystem: {mount: /mnt/kv}
"""

CASES = [
    ("unknown top-level key", GOOD_HOSTS + "hostz: {}\n",
     "inv.yaml:5: hostz: unknown key; allowed here: version, defaults, hosts, groups, arrays, network, serve, "
     "monitoring, lab"),
    ("missing version", "hosts: {a: {address: 192.0.2.1}}\n",
     "inv.yaml:1: missing required key 'version'"),
    ("wrong version", "version: 2\nhosts: {a: {address: 192.0.2.1}}\n",
     "inv.yaml:1: version: 2 is not allowed; one of: 1"),
    ("wrong type", GOOD_HOSTS + "defaults: {sudo: 'yes'}\n",
     "inv.yaml:5: defaults.sudo: must be true or false, got a string"),
    ("port out of range", "version: 1\nhosts:\n  a: {address: 192.0.2.1, port: 0}\n",
     "inv.yaml:3: hosts.a.port: must be between 1 and 65535, got 0"),
    ("bad address", "version: 1\nhosts:\n  a: {address: 'x;y'}\n",
     "inv.yaml:3: hosts.a.address: 'x;y' must be an IP address or a DNS host name"),
    ("bad user", "version: 1\nhosts:\n  a: {address: 192.0.2.1, user: '-oProxyCommand=x'}\n",
     "inv.yaml:3: hosts.a.user: '-oProxyCommand=x' must be a POSIX user name (lower-case letters, digits, _ and -)"),
    ("bad role", "version: 1\nhosts:\n  a: {address: 192.0.2.1, roles: [gpu]}\n",
     "inv.yaml:3: hosts.a.roles[0]: 'gpu' is not allowed; one of: target, initiator, server, client"),
    ("duplicate key", "version: 1\nhosts:\n  a: {address: 192.0.2.1}\n  a: {address: 192.0.2.2}\n",
     "inv.yaml:4: hosts.a: duplicate key (also on an earlier line); line 4 wins"),
    ("duplicate endpoint", "version: 1\nhosts:\n  a: {address: 192.0.2.1}\n  b: {address: 192.0.2.1}\n",
     "inv.yaml:4: hosts.b.address: 192.0.2.1:22 is already host 'a'"),
    ("bad host key", "version: 1\nhosts:\n  a: {address: 192.0.2.1, host_key: 'MD5:aa:bb'}\n",
     "inv.yaml:3: hosts.a.host_key: 'MD5:aa:bb' must be an OpenSSH public key line ('ssh-ed25519 AAAA...') "
     "or a fingerprint 'SHA256:...'"),
    ("malformed NQN", GOOD_HOSTS + ARRAY.replace("nqn.2026-11.io.fxctl:kv", "'nqn.2026-13.io.fxctl:kv'"),
     "inv.yaml:8: arrays[0].nqn: 'nqn.2026-13.io.fxctl:kv' is not an NVMe Qualified Name: nqn.YYYY-MM."
     "<reverse domain>[:<identifier>], lower-case domain, identifier of letters, digits and ._:@+-"),
    ("NQN with shell syntax", GOOD_HOSTS + ARRAY.replace("nqn.2026-11.io.fxctl:kv", "'nqn.2026-11.io.fxctl:$(id)'"),
     "inv.yaml:8: arrays[0].nqn: 'nqn.2026-11.io.fxctl:$(id)' is not an NVMe Qualified Name: nqn.YYYY-MM."
     "<reverse domain>[:<identifier>], lower-case domain, identifier of letters, digits and ._:@+-"),
    ("bad listen IP", GOOD_HOSTS + ARRAY.replace("198.51.100.1,", "198.51.100.256,"),
     "inv.yaml:9: arrays[0].listen.address: '198.51.100.256' must be an IPv4 or IPv6 address"),
    ("kernel device path", GOOD_HOSTS + ARRAY.replace("{serial: SN2}", "{by_id: /dev/nvme1n1}"),
     "inv.yaml:10: arrays[0].drives[1].by_id: '/dev/nvme1n1' must be a /dev/disk/by-id/ path "
     "(never /dev/nvmeXnY, which changes across boots)"),
    ("drive twice", GOOD_HOSTS + ARRAY.replace("{serial: SN2}", "{serial: SN1}"),
     "inv.yaml:10: arrays[0].drives[1]: drive SN1 is already used on t1"),
    ("both serial and by_id", GOOD_HOSTS + ARRAY.replace("{serial: SN2}", "{serial: SN2, by_id: /dev/disk/by-id/x}"),
     "inv.yaml:10: arrays[0].drives[1]: give exactly one of: serial, by_id (found serial, by_id)"),
    ("undefined target", GOOD_HOSTS + ARRAY.replace("target: t1", "target: t9"),
     "inv.yaml:7: arrays[0].target: host 't9' is not defined under hosts (defined: i1, t1)"),
    ("undefined initiator", GOOD_HOSTS + ARRAY.replace("[i1]", "[i2]"),
     "inv.yaml:11: arrays[0].initiators[0]: host 'i2' is not defined under hosts (defined: i1, t1)"),
    ("two initiators on one array", GOOD_HOSTS.replace("i1: {address: 192.0.2.2, roles: [initiator]}",
                                                       "i1: {address: 192.0.2.2}\n  i2: {address: 192.0.2.3}")
     + ARRAY.replace("[i1]", "[i1, i2]"),
     "inv.yaml:12: arrays[0].initiators: one initiator per array: md RAID0 + XFS is not a shared filesystem, "
     "two hosts mounting it would corrupt it; give each initiator its own array"),
    ("relative mount", GOOD_HOSTS + ARRAY.replace("/mnt/kv", "mnt/kv"),
     "inv.yaml:12: arrays[0].filesystem.mount: 'mnt/kv' must be an absolute path other than / "
     "(letters, digits and ._-), such as /mnt/kvtier"),
    ("missing filesystem", GOOD_HOSTS + ARRAY.replace("    filesystem: {mount: /mnt/kv}\n", ""),
     "inv.yaml:6: arrays[0]: missing required key 'filesystem'"),
    ("bad transport", GOOD_HOSTS + ARRAY + "    transport: fc\n",
     "inv.yaml:13: arrays[0].transport: 'fc' is not allowed; one of: rdma, tcp"),
    ("bad interface name", GOOD_HOSTS + "network:\n  interfaces:\n    i1: [{netdev: 'eth0 up'}]\n",
     "inv.yaml:7: network.interfaces.i1[0].netdev: 'eth0 up' must be a network interface name: 1-15 of "
     "letters, digits and _.:- (not starting with - or .)"),
    ("interface on unknown host", GOOD_HOSTS + "network:\n  interfaces:\n    zz: [{netdev: eth1}]\n",
     "inv.yaml:7: network.interfaces.zz: host 'zz' is not defined under hosts (defined: i1, t1)"),
    ("PFC priority range", GOOD_HOSTS + "network:\n  pfc_priority: 8\n  interfaces:\n    i1: [{netdev: eth1}]\n",
     "inv.yaml:6: network.pfc_priority: must be between 0 and 7, got 8"),
    ("bad size", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  l1_size: lots\n",
     "inv.yaml:7: serve.l1_size: 'lots' must be a size in bytes or with a binary unit, such as 64K, 8GiB or 2TiB"),
    ("invalid YAML", "version: 1\nhosts: [\n",
     "inv.yaml:3: invalid YAML: expected the node content, but found '<stream end>'"),
    ("top-level list", "- version: 1\n",
     "inv.yaml:1: must be a mapping, got a list"),
    ("top-level scalar", "just text\n",
     "inv.yaml:1: must be a mapping, got a string"),
    ("all-numeric address", "version: 1\nhosts:\n  a: {address: '12345'}\n",
     "inv.yaml:3: hosts.a.address: '12345' is neither an IP address nor a DNS host name "
     "(all digits, but not a valid IPv4 address)"),
    ("dotted numbers past 255", "version: 1\nhosts:\n  a: {address: '10.0.0.256'}\n",
     "inv.yaml:3: hosts.a.address: '10.0.0.256' is neither an IP address nor a DNS host name "
     "(all digits, but not a valid IPv4 address)"),
    ("IPv6 zone with a space", GOOD_HOSTS + ARRAY.replace("198.51.100.1,", "'fe80::1%a b',"),
     "inv.yaml:9: arrays[0].listen.address: 'fe80::1%a b' must be an IPv4 or IPv6 address "
     "(an IPv6 zone is an interface name)"),
    ("host names differing in case", "version: 1\nhosts:\n  gpu1: {address: 192.0.2.1}\n"
     "  GPU1: {address: 192.0.2.2}\n",
     "inv.yaml:4: hosts.GPU1: differs from host 'gpu1' only in case; DNS and SSH do not tell them apart"),
    ("mount with a trailing newline", GOOD_HOSTS + ARRAY.replace("/mnt/kv}", '"/mnt/kv\\n"}'),
     "inv.yaml:12: arrays[0].filesystem.mount: '/mnt/kv\\n' must be an absolute path other than / "
     "(letters, digits and ._-), such as /mnt/kvtier"),
    ("NQN with a trailing newline",
     GOOD_HOSTS + ARRAY.replace("nqn.2026-11.io.fxctl:kv", '"nqn.2026-11.io.fxctl:kv\\n"'),
     "inv.yaml:8: arrays[0].nqn: 'nqn.2026-11.io.fxctl:kv\\n' is not an NVMe Qualified Name: nqn.YYYY-MM."
     "<reverse domain>[:<identifier>], lower-case domain, identifier of letters, digits and ._:@+-"),
    *[(f"md chunk {chunk}", GOOD_HOSTS + ARRAY + f"    raid: {{chunk: {chunk}}}\n",
       f"inv.yaml:13: arrays[0].raid.chunk: {shown} must be a power of two from 4K to 64M, such as 64K or 512K")
      for chunk, shown in (("0", "0"), ("1000", "1000"), ("1.5K", "'1.5K'"), ("48K", "'48K'"), ("1T", "'1T'"),
                           ("2K", "'2K'"))],
    ("unknown serve key", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  instance: 2\n",
     "inv.yaml:7: serve.instance: unknown key; allowed here: hosts, profile, engine, model, tensor_parallel, "
     "pipeline_parallel, instances, port, max_num_seqs, max_model_len, max_num_batched_tokens, "
     "gpu_memory_utilization, block_size, kv_cache_dtype, enforce_eager, l1_size, l2_size, l2_dir, python, "
     "state_dir, router, metrics_address"),
    ("empty drives", GOOD_HOSTS + ARRAY.replace("[{serial: SN1}, {serial: SN2}]", "[]"),
     "inv.yaml:10: arrays[0].drives: needs at least 1 item(s)"),
    ("role listed twice", "version: 1\nhosts:\n  a: {address: 192.0.2.1, roles: [target, target]}\n",
     "inv.yaml:3: hosts.a.roles[1]: 'target' is listed twice"),
    ("hosts as a list", "version: 1\nhosts: [a, b]\n",
     "inv.yaml:2: hosts: must be a mapping, got a list"),
    ("version true", "version: true\nhosts: {a: {address: 192.0.2.1}}\n",
     "inv.yaml:1: version: True is not allowed; one of: 1"),
    ("a python tag on a mapping", "version: 1\nhosts: !!python/object:os.system {}\n",
     "inv.yaml:2: hosts: invalid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object:os.system'"),
    ("a python tag on a scalar", "version: 1\nhosts: {a: {address: !!python/name:os.system x}}\n",
     "inv.yaml:2: hosts.a.address: invalid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/name:os.system'"),
    ("size by its Python name", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  l1_bytes: 5\n",
     "inv.yaml:7: serve.l1_bytes: unknown key; write l1_size (a size such as 64G)"),
    ("gpu memory as a percentage", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  gpu_memory_utilization: 90\n",
     "inv.yaml:7: serve.gpu_memory_utilization: must be a fraction in (0, 1], got 90"),
    ("gpu memory as a boolean", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  gpu_memory_utilization: true\n",
     "inv.yaml:7: serve.gpu_memory_utilization: must be a fraction in (0, 1], got True"),
    ("a KV dtype with a space", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  kv_cache_dtype: 'fp8 --x'\n",
     "inv.yaml:7: serve.kv_cache_dtype: 'fp8 --x' must be a name of vLLM's --kv-cache-dtype, such as auto or fp8 "
     "(vLLM's own parser checks it)"),
    ("a block size of zero", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  block_size: 0\n",
     "inv.yaml:7: serve.block_size: must be between 1 and 1024, got 0"),
    ("enforce_eager as a word", GOOD_HOSTS + "serve:\n  hosts: [i1]\n  enforce_eager: sometimes\n",
     "inv.yaml:7: serve.enforce_eager: must be true or false, got a string"),
]


@pytest.mark.parametrize("label,text,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_inventory_names_file_line_key(label, text, expected):
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(text, "inv.yaml")
    problems = [str(p) for p in info.value.problems]
    assert problems == [expected]


def test_all_problems_are_reported_at_once():
    text = textwrap.dedent("""\
        version: 1
        hosts:
          a: {address: 'bad address', port: 0, colour: red}
        """)
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(text, "inv.yaml")
    assert len(info.value.problems) == 3
    assert info.value.exit_code == 2


def test_example_inventory_is_valid(repo_root):
    inventory = load_inventory(repo_root / "examples" / "inventory.yaml")
    assert set(inventory.hosts) == {"stor1", "stor2", "gpu1", "gpu2"}
    assert inventory.arrays[0].chunk_bytes == 65536
    assert [h.name for h in inventory.select(["initiator"])] == ["gpu1", "gpu2"]


def test_defaults_apply_and_hosts_override():
    inventory = load_inventory_text(
        "version: 1\ndefaults: {user: ops, sudo: true, port: 2222}\n"
        "hosts:\n  a: {address: 192.0.2.1}\n  b: {address: 192.0.2.2, user: root, port: 22}\n")
    a, b = inventory.hosts["a"], inventory.hosts["b"]
    assert (a.user, a.sudo, a.port) == ("ops", True, 2222)
    assert (b.user, b.sudo, b.port) == ("root", True, 22)


BOMB = """\
version: 1
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_alias_bomb_is_refused_fast_with_its_line():
    import time

    started = time.monotonic()
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text(BOMB, "inv.yaml")
    assert time.monotonic() - started < 5
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith("inv.yaml:") and "expands to more than 100000 values" in problem
    assert info.value.exit_code == 2


def test_self_referencing_alias_is_a_problem_not_a_recursion_error():
    with pytest.raises(InventoryInvalid) as info:
        load_inventory_text("version: 1\nhosts: &h\n  a: *h\n", "inv.yaml")
    assert [str(p) for p in info.value.problems] == [
        "inv.yaml:3: hosts.a: a YAML alias refers to a value that contains it (a cycle)"]


def test_unknown_host_in_a_selection_is_bad_input(repo_root):
    from fxctl.errors import BadInput

    inventory = load_inventory(repo_root / "examples" / "inventory.yaml")
    assert [h.name for h in inventory.select(["gpu1", "initiator"])] == ["gpu1", "gpu2"]
    with pytest.raises(BadInput) as info:
        inventory.select(["gpu1", "gpu9"])
    assert "'gpu9'" in str(info.value) and info.value.exit_code == 2


def test_serve_keys_not_set_are_none_and_set_ones_are_kept():
    inventory = load_inventory_text(GOOD_HOSTS + "serve:\n  hosts: [i1]\n  instances: 1\n  l1_size: 1G\n")
    assert inventory.serve.instances == 1 and inventory.serve.port is None and inventory.serve.python is None
    assert inventory.serve.set_fields() == {"hosts": ("i1",), "instances": 1, "l1_bytes": 1 << 30}


def test_every_default_comes_from_the_model():
    inventory = load_inventory_text(GOOD_HOSTS + ARRAY)
    array = inventory.arrays[0]
    assert (array.chunk_bytes, array.raid_name, array.fs_label, array.listen.port) == (65536, "kv", "kv", 4420)
    assert array.mount_options == ("noatime", "logbsize=256k", "largeio", "swalloc")
    assert (inventory.hosts["t1"].port, inventory.hosts["t1"].user) == (22, "root")


def test_a_host_with_vars_is_hashable():
    inventory = load_inventory_text("version: 1\nhosts:\n  a: {address: 192.0.2.1, vars: {rack: r1}}\n")
    host = inventory.hosts["a"]
    assert host.vars == {"rack": "r1"} and {host: 1}[host] == 1
