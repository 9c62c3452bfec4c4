"""Start the emulator's HTTP server: build the engine from a profile, print the banner, serve until stopped."""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from fxctl.sim.app import EMULATOR_NOTE, ServerConfig, build_app
from fxctl.sim.connector import build_tiers
from fxctl.sim.engine import Engine
from fxctl.sim.profile import Profile


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    time_scale: float = 1.0
    offload: bool | None = None
    served_model_name: str | None = None
    real_tier: Path | None = None
    real_tier_scale: float = 32


def build_engine(profile: Profile, options: ServeOptions) -> Engine:
    l2 = None
    if options.real_tier is not None:
        from fxctl.sim.real_l2 import open_real_l2
        l2 = open_real_l2(profile, options.real_tier, options.real_tier_scale)
    return Engine(profile, offload=options.offload, tiers=build_tiers(profile, l2=l2))


def banner(profile: Profile, engine: Engine, config: ServerConfig, url: str) -> str:
    return (f"fxctl sim — EMULATOR, simulated GPU timing (not a real GPU)\n"
            f"  serving {config.model_name} at {url}  (OpenAI API: /v1/completions, /v1/chat/completions)\n"
            f"  profile {profile.name}: {engine.pool.num_blocks} HBM KV blocks of {engine.block_size} tokens, "
            f"offload {'on' if engine.offload else 'off'}, time scale {config.time_scale} "
            f"(reported figures are model time)")


async def serve(profile: Profile, options: ServeOptions, stop: asyncio.Event | None = None) -> None:
    engine = build_engine(profile, options)
    config = ServerConfig(options.served_model_name or profile.get("model", "name", profile.name),
                          profile.name, options.time_scale)
    runner = web.AppRunner(build_app(engine, config), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port)
    try:
        await site.start()
    except OSError as exc:   # one line for the operator, not a traceback (fxctl's error boundary prints it)
        await runner.cleanup()
        from fxctl.errors import FxError
        raise FxError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}",
                      "another server holds that port: pick another --port, or stop it") from None
    port = site._server.sockets[0].getsockname()[1]  # the real port when 0 was asked for
    print(banner(profile, engine, config, f"http://{options.host}:{port}"), flush=True)
    print(f"listening on http://{options.host}:{port}", flush=True)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        if hasattr(engine.tiers.l2, "close"):
            engine.tiers.l2.close()
        print("fxctl sim stopped", file=sys.stderr, flush=True)


def run_server(profile: Profile, options: ServeOptions) -> None:
    asyncio.run(serve(profile, options))


__all__ = ["EMULATOR_NOTE", "ServeOptions", "build_engine", "run_server", "serve"]
