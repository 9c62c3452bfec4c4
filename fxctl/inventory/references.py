"""Checks across sections: references to undefined hosts, duplicates, roles that contradict use."""

from __future__ import annotations

from collections import defaultdict

from fxctl.inventory.model import HostOptions
from fxctl.inventory.source import Document, Problem


def _map(value) -> dict:
    return value if isinstance(value, dict) else {}  # a wrong type is the shape check's problem


def _seq(value) -> list:
    return value if isinstance(value, list) else []


def check_references(doc: Document) -> list[Problem]:
    data = _map(doc.data)
    hosts_section = _map(data.get("hosts"))
    hosts = set(hosts_section)
    problems: list[Problem] = []

    def need_host(path: tuple, name) -> None:
        if isinstance(name, str) and name not in hosts:
            problems.append(doc.problem(path, f"host '{name}' is not defined under hosts"
                                        + (f" (defined: {', '.join(sorted(map(str, hosts)))})" if hosts else "")))

    folded: dict[str, str] = {}
    for name in hosts_section:
        if isinstance(name, str) and name.lower() in folded:
            problems.append(doc.problem(("hosts", name), f"differs from host '{folded[name.lower()]}' only in "
                                        "case; DNS and SSH do not tell them apart"))
        folded.setdefault(str(name).lower(), str(name))
    endpoints: dict[tuple, str] = {}
    for name, host in hosts_section.items():
        port = _map(host).get("port", _map(data.get("defaults")).get("port", HostOptions.port))
        if isinstance(_map(host).get("address"), str) and isinstance(port, int):
            key = (host["address"], port)
            if key in endpoints:
                problems.append(doc.problem(("hosts", name, "address"),
                                            f"{key[0]}:{key[1]} is already host '{endpoints[key]}'"))
            endpoints[key] = name
    for group, members in _map(data.get("groups")).items():
        if group in hosts:
            problems.append(doc.problem(("groups", group), "a group cannot have the name of a host"))
        for index, member in enumerate(_seq(members)):
            need_host(("groups", group, index), member)
    problems += _check_arrays(doc, need_host)
    interfaces = _map(_map(data.get("network")).get("interfaces"))
    for host, items in interfaces.items():
        need_host(("network", "interfaces", host), host)
        for index, item in enumerate(_seq(items)):
            if isinstance(item, dict) and not (item.get("netdev") or item.get("rdma_device")):
                problems.append(doc.problem(("network", "interfaces", host, index),
                                            "give netdev, rdma_device, or both"))
            if isinstance(item, dict) and item.get("soft_roce") and not item.get("netdev"):
                problems.append(doc.problem(("network", "interfaces", host, index, "soft_roce"),
                                            "Soft-RoCE needs the netdev it runs on"))
    for index, host in enumerate(_seq(_map(data.get("serve")).get("hosts"))):
        need_host(("serve", "hosts", index), host)
    return problems


def _check_arrays(doc: Document, need_host) -> list[Problem]:
    problems: list[Problem] = []
    arrays = _seq(_map(doc.data).get("arrays"))
    seen_names: dict[str, int] = {}
    seen_nqns: dict[str, int] = {}
    mounts: dict[tuple, int] = {}
    drives_on_target: dict[tuple, int] = defaultdict(int)
    for index, array in enumerate(arrays):
        if not isinstance(array, dict):
            continue
        path = ("arrays", index)
        for key, seen in (("name", seen_names), ("nqn", seen_nqns)):
            value = array.get(key)
            if isinstance(value, str):
                if value in seen:
                    problems.append(doc.problem(path + (key,), f"'{value}' is also arrays[{seen[value]}].{key}"))
                seen[value] = index
        need_host(path + ("target",), array.get("target"))
        if isinstance(array.get("initiators"), list) and len(array["initiators"]) > 1:
            problems.append(doc.problem(path + ("initiators",),
                                        "one initiator per array: md RAID0 + XFS is not a shared filesystem, "
                                        "two hosts mounting it would corrupt it; give each initiator its own array"))
        for i, initiator in enumerate(_seq(array.get("initiators"))):
            need_host(path + ("initiators", i), initiator)
            if initiator == array.get("target"):
                problems.append(doc.problem(path + ("initiators", i), "the target cannot be its own initiator"))
            mount = _map(array.get("filesystem")).get("mount")
            if isinstance(mount, str) and isinstance(initiator, str):
                if (initiator, mount) in mounts:
                    problems.append(doc.problem(path + ("filesystem", "mount"),
                                                f"{mount} on {initiator} is also used by arrays[{mounts[(initiator, mount)]}]"))
                mounts[(initiator, mount)] = index
        for d, drive in enumerate(_seq(array.get("drives"))):
            if not isinstance(drive, dict):
                continue
            ident = drive.get("serial") or drive.get("by_id")
            key = (str(array.get("target")), str(ident))
            if ident is not None and key in drives_on_target:
                problems.append(doc.problem(path + ("drives", d), f"drive {ident} is already used on {key[0]}"))
            drives_on_target[key] = d
    return problems
