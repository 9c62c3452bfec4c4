"""`fxctl inventory ping` and `trust` through the real CLI against real sshd hosts."""

from __future__ import annotations

import json

import pytest

from fxctl.cli import main

pytestmark = pytest.mark.sshd


def write_inventory(path, world, known_hosts):
    lines = ["version: 1", "defaults:", f"  key: {world['client_key']}", f"  known_hosts: {known_hosts}",
             "hosts:"]
    for server in world["servers"][:2]:
        lines.append(f"  {server.name}: {{address: 127.0.0.1, port: {server.port}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def test_unknown_keys_refused_until_trusted(ssh_world, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FXCTL_INVENTORY", raising=False)
    known = tmp_path / "known_hosts"
    inventory = write_inventory(tmp_path / "inv.yaml", ssh_world, known)
    code, out, _ = invoke(["-i", str(inventory), "-o", "json", "inventory", "ping"], capsys)
    data = json.loads(out)
    assert code == 1 and [d["ok"] for d in data] == [False, False]
    assert "host key unknown" in data[0]["error"]
    assert not known.exists(), "nothing may be trusted implicitly"

    code, out, _ = invoke(["-i", str(inventory), "inventory", "trust", "host0", "--yes"], capsys)
    assert code == 0 and "host0: added to" in out
    code, out, _ = invoke(["-i", str(inventory), "-o", "json", "inventory", "ping"], capsys)
    assert code == 1 and [d["ok"] for d in json.loads(out)] == [True, False]

    code, out, _ = invoke(["-i", str(inventory), "inventory", "trust", "--yes"], capsys)
    assert "host0: already trusted" in out and "host1: added to" in out
    code, out, _ = invoke(["-i", str(inventory), "inventory", "ping"], capsys)
    assert code == 0 and out.count(" ok ") == 2
