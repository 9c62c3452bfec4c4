"""The launch lines fxctl renders, read back by the engines' own parsers (issue 27).

fxctl/data/engine_argv_parse.py runs with the serving env's python and parses each instance's vLLM argv with
vLLM's parser (and `AsyncEngineArgs.from_cli_args`) and the LMCache server's with LMCache's (and its config
parsers). `expected_vllm` / `expected_lmcache` say what those must hold for the settings (the table of
serve.vllm_flags, the ports, the connector, L1/L2 sizes); `mismatches` compares. Pre-flight runs it on each
host before anything starts: a flag that host's vLLM does not know, or a value it reads differently, fails the
check with the parser's own message. tests/vllm/test_engine_args.py runs it for every shipped profile.
"""

from __future__ import annotations

import hashlib
import json

from fxctl import data
from fxctl.integrations.lmcache.server import ADAPTER_CLASS, ADAPTER_MODULE
from fxctl.paths import serve_cache_dir
from fxctl.remote.command import sh
from fxctl.serve.lmcache_mode import LMCACHE_ADAPTER_OF
from fxctl.serve.render import plan_instances
from fxctl.serve.roles import Role
from fxctl.serve.vllm_flags import flag_values

PARSE_TIMEOUT_S = 300
MIB = 1 << 20   # L1 reaches LMCache as GiB with decimals (--l1-size-gb): compared in whole MiB


def cases_of(plans) -> list[dict]:
    """One case per engine instance: its vLLM argv and the host's LMCache server argv (MP mode)."""
    server = next((p.argv for p in plans if p.role == Role.LMCACHE_SERVER), None)
    return [{"vllm": list(p.argv), "lmcache": list(server) if server else None}
            for p in plans if p.role == Role.ENGINE and p.engine == "vllm"]


def parse_command(python: str, cases: list[dict], site_dir: str | None = None):
    command = sh(python, "-c", data.text("engine_argv_parse.py"), json.dumps(cases, separators=(",", ":")))
    return sh("env", f"PYTHONPATH={site_dir}", command) if site_dir else command


def parse_output(stdout: str, count: int) -> list[dict]:
    """The script's last line: one result per case; ValueError when it is not there (the python failed)."""
    for line in reversed(stdout.strip().splitlines()):   # the engines log lines of their own ("[2026-...")
        try:
            results = json.loads(line)
        except ValueError:
            continue
        if isinstance(results, list) and len(results) == count and all(isinstance(r, dict) for r in results):
            return results
    raise ValueError("the parse script printed no result")


def expected_vllm(settings) -> dict:
    """EngineArgs fields the settings fix, by vLLM's names."""
    want = {entry.dest: value for entry, value in flag_values(settings)}
    want["model"] = settings.model
    return want


def expected_lmcache(settings) -> dict:
    """What LMCache's parsers must read (its ports and the tier's directory are fxctl's own rendering)."""
    l1 = settings.l1_bytes_per_host
    common = {"mp.chunk_size": settings.chunk_size, "l1 MiB": round(l1 / MIB)}
    if settings.offload in LMCACHE_ADAPTER_OF:   # LMCache's own adapter (an anchor): its spec is LMCache's
        return common
    return {**common, "l2 adapter": f"{ADAPTER_MODULE}.{ADAPTER_CLASS}",
            "l2_bytes": settings.l2_bytes_per_host}


def mismatches(settings, case: dict, parsed: dict) -> list[str]:
    """What the engines' parsers read differently from the settings, or their own errors."""
    problems = []
    vllm = parsed.get("vllm")
    if vllm is not None:
        if "error" in vllm:
            problems.append(f"vLLM's parser refused the launch line: {vllm['error']}")
        else:
            fields = vllm["engine_args"]
            for dest, value in expected_vllm(settings).items():
                if fields.get(dest) != value:
                    problems.append(f"vLLM ({vllm['engine']}) read {dest}={fields.get(dest)!r}, the settings say "
                                    f"{value!r}")
    server = parsed.get("lmcache")
    if server is not None and case.get("lmcache"):
        if "error" in server:
            problems.append(f"LMCache's server parser refused its launch line: {server['error']}")
        else:
            problems += _lmcache_mismatches(settings, server)
    return problems


def _lmcache_mismatches(settings, server: dict) -> list[str]:
    want = expected_lmcache(settings)
    adapters = server["storage"]["l2_adapter_config"]["adapters"]
    plugin = adapters[0] if len(adapters) == 1 and isinstance(adapters[0], dict) else {}
    params = plugin.get("adapter_params") or {}
    got = {"mp.chunk_size": server["mp"].get("chunk_size"),
           "l1 MiB": round(server["storage"]["l1_manager_config"]["memory_config"]["size_in_bytes"] / MIB),
           "l2 adapter": f"{plugin.get('module_path')}.{plugin.get('class_name')}",
           "l2_bytes": params.get("l2_bytes")}
    return [f"LMCache ({server['engine']}) read {key}={got[key]!r}, the settings say {value!r}"
            for key, value in want.items() if got[key] != value]


# what varies between deployments of the same settings and cannot change how a parser reads the line: the
# ports and the tier's directory (numbers and paths fxctl renders itself); masked in the cache key
PORT_FLAGS = ("--port", "--http-port")
MASKED_JSON = {"--kv-transfer-config": ("lmcache.mp.port",), "--l2-adapter": ("l2_path", "metrics_port")}


def _masked(argv: list[str] | None) -> list[str] | None:
    if argv is None:
        return None
    out = list(argv)
    for index, token in enumerate(out[:-1]):
        if token in PORT_FLAGS:
            out[index + 1] = "<port>"
        elif token in MASKED_JSON:
            try:
                value = json.loads(out[index + 1])
            except ValueError:
                continue
            _mask_keys(value, MASKED_JSON[token])
            out[index + 1] = json.dumps(value, sort_keys=True)
    return out


def _mask_keys(tree, keys: tuple[str, ...]) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in keys:
                tree[key] = "<masked>"
            else:
                _mask_keys(value, keys)


def cache_key(host: str, python: str, versions: dict, cases: list[dict]) -> str:
    """Parsing is a pure function of the engines' versions and the argv; ports and the tier's directory are
    masked (deployments that differ only there share a result). Pre-flight keeps a result per key."""
    masked = [{name: _masked(argv) for name, argv in case.items()} for case in cases]
    text = json.dumps([host, python, sorted(versions.items()), masked], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def check_engine_args(machine, settings, result) -> None:
    """Pre-flight: the host's vLLM and LMCache parse the launch lines and read the settings' values.

    The result is kept per (host, python, engine versions, argv) under the serve cache: a second start of
    the same deployment does not pay the parsers' import again (about 25 s on a 2-core CPU host)."""
    plans = plan_instances(settings, machine.name)
    cases = cases_of(plans)
    if not cases:
        return
    key = cache_key(machine.name, settings.python, result.versions, cases)
    store = serve_cache_dir() / "engine-args" / f"{key}.json"
    try:
        results = json.loads(store.read_text())
    except (OSError, ValueError):
        res = machine.run(parse_command(settings.python, cases, settings.site_dir), timeout=PARSE_TIMEOUT_S)
        try:
            results = parse_output(res.stdout, len(cases))
        except ValueError:
            result.add("engine-args", "failed", f"{settings.python} could not run the engines' parsers: "
                       f"{res.tail(3) or f'exit {res.exit_code}'}", "check the serving env (vllm and lmcache import)")
            return
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(results) + "\n")
    problems = sorted({problem for case, parsed in zip(cases, results, strict=True)
                       for problem in mismatches(settings, case, parsed)})
    engines = sorted({part["engine"] for parsed in results for part in parsed.values() if "engine" in part})
    if problems:
        result.add("engine-args", "failed", "; ".join(problems),
                   "remove the setting the host's version does not know from the profile or inventory, or use "
                   "the engine version fxctl is tested with (fxctl serve install-env on CPU hosts)")
    else:
        names = ", ".join(entry.dest for entry, _ in flag_values(settings))
        result.add("engine-args", "ok", f"{' and '.join(engines)} parse the launch lines: {names} as set")
