"""`fxctl serve`'s shared options: where (--local, --host, --name), a deployment's settings (settings_options,
resolved by fxctl.cli.serve_settings) and what only a start takes (start_options)."""

from __future__ import annotations

import click

from fxctl.inventory.validators import parse_size
from fxctl.serve.listen import METRICS_ADDRESSES
from fxctl.serve.router_settings import DEFAULT_POLICY
from fxctl.serve.router_settings import POLICIES as ROUTER_POLICIES
from fxctl.serve.settings import OFFLOADS


def size_option(_ctx, _param, value):
    if value is None:
        return None
    try:
        size = parse_size(value)
    except (ValueError, TypeError) as exc:
        raise click.BadParameter(str(exc)) from None
    if not size:
        raise click.BadParameter(f"{value!r} is not a size like 64GiB")
    return size


def name_option(_ctx, _param, value):
    from fxctl.serve.settings import NAME_RE

    if value is not None and not NAME_RE.fullmatch(value):
        raise click.BadParameter(f"{value!r}: lowercase letters, digits and '-', at most 40")
    return value


def where_options(func):
    func = click.option("--name", default=None, callback=name_option,
                        help="Deployment name (default: all for status/stop/logs; "
                        "'main' for start).")(func)
    func = click.option("--host", "hosts", multiple=True, help="Inventory host (repeatable); default: "
                        "serve.hosts of the inventory.")(func)
    func = click.option("--local", "local", is_flag=True, help="This machine, not the inventory's hosts.")(func)
    return func


def settings_options(func):
    """The options that resolve a deployment's settings (fxctl.cli.serve_settings), with where it runs."""
    options = [
        click.option("--profile", "profile_name", default=None, help="Profile in profiles/ or a YAML path "
                     "(default: the inventory's serve.profile)."),
        click.option("--engine", type=click.Choice(["vllm", "sim"]), default=None,
                     help="vllm (default) or sim: fxctl's emulator with the same profile."),
        click.option("--offload", type=click.Choice(OFFLOADS), default=None,
                     help="KV below vLLM: fxctl's tier (default); LMCache's own, as comparison anchors: the "
                     "fs_native, fs or raw_block L2 adapter of its MP server, or its in-process disk tier "
                     "(lmcache-disk); or none (recompute)."),
        click.option("--lmcache-mode", type=click.Choice(["mp", "in-process"]), default=None,
                     help="LMCache's multi-process server (the default, on GPU and CPU hosts alike) or its "
                     "deprecated in-process plugin (where --offload lmcache-disk needs it, or to keep serving a "
                     "warm in-process tier)."),
        click.option("--model", default=None, help="Model id (default: the profile's)."),
        click.option("--tp", "tensor_parallel", type=click.IntRange(1, 64), default=None,
                     help="Tensor-parallel size per instance."),
        click.option("--pp", "pipeline_parallel", type=click.IntRange(1, 64), default=None,
                     help="Pipeline-parallel stages: > 1 serves one model across that many hosts (one stage per "
                     "host, --tp within it) with a Ray cluster under vLLM (head on the first host); needs "
                     "--offload none."),
        click.option("--instances", type=click.IntRange(1, 64), default=None, help="Instances per host."),
        click.option("--port", type=click.IntRange(1, 65535), default=None, help="First instance's port "
                     "(instance i: port + i; default 8000)."),
        click.option("--max-num-seqs", type=click.IntRange(1, 65536), default=None, help="vLLM --max-num-seqs."),
        click.option("--l1-size", "l1_bytes", callback=size_option, default=None,
                     help="DRAM tier per host (LMCache's CPU pool), e.g. 64GiB."),
        click.option("--l2-size", "l2_bytes", callback=size_option, default=None, help="L2 per host, e.g. 2TiB."),
        click.option("--l2-dir", default=None, help="L2 directory on the array's mount (default: the inventory's "
                     "serve.l2_dir, or <the host's array mount>/fxtier)."),
        click.option("--python", default=None, help="Python of the serving env (vllm is beside it)."),
        click.option("--time-scale", type=click.FloatRange(min=0), default=None,
                     help="Emulator only: wall seconds per model second (default 1)."),
        click.option("--router", "router_mode", type=click.Choice(["auto", "on", "off"]), default=None,
                     help="vllm-router in front of the instances: auto (default: when there is more than one "
                     "vLLM over all hosts), on, off. Runs on serve.router.host or the first serving host."),
        click.option("--router-policy", type=click.Choice(ROUTER_POLICIES), default=None,
                     help=f"The router's policy (default: serve.router.policy, the profile's serving.router.policy, "
                     f"else {DEFAULT_POLICY})."),
        click.option("--router-port", type=click.IntRange(1, 65534), default=None,
                     help="The router's port (default: first vLLM port + 80; its metrics: the next one)."),
        click.option("--metrics-address", type=click.Choice(METRICS_ADDRESSES), default=None,
                     help="Where fxctl's tier and the router serve their metrics: 127.0.0.1 (the default) or "
                     "0.0.0.0, for a Prometheus on another machine (fxctl serve monitor)."),
        click.option("--engine-command", default=None, hidden=True,
                     help="Testing: replace the engine's argv (shell words)."),
    ]
    for option in reversed(options):
        func = option(func)
    return where_options(func)


def start_options(func):
    """settings_options and what only a start takes."""
    options = [
        click.option("--ready-timeout", type=click.FloatRange(min=1), default=600, show_default=True,
                     help="Seconds to wait for /health and /v1/models."),
        click.option("--dry-run", is_flag=True, help="Print what would run, where (env, argv, LMCache YAML); "
                     "run nothing."),
        click.option("--check", is_flag=True, help="Plan: run the pre-flight on each host read only and print "
                     "what start would install and launch; change nothing. Exit 1 when start would fail."),
        click.option("--skip-preflight", is_flag=True, help="Launch without the pre-flight checks."),
        click.option("--no-install", is_flag=True, help="Pre-flight reports a missing or stale fxctl instead "
                     "of pushing fxctl's wheel."),
    ]
    for option in reversed(options):
        func = option(func)
    return settings_options(func)


def resolve_where(app, hosts, local):
    from fxctl.serve.where import select

    inventory = None if local or (not hosts and not app.inventory_path) else app.inventory()
    return select(inventory, hosts, local), inventory
