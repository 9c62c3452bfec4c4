"""The OpenAI-compatible HTTP face of the emulator (aiohttp), shaped like `vllm serve`.

Every response carries `X-Fxctl-Emulator`; completions carry `fxctl_sim` with the request's model-time
figures, since the GPU time behind them is simulated.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from aiohttp import web

from fxctl.sim.engine import Engine, RequestRejected
from fxctl.sim.metrics import render_metrics
from fxctl.sim.request import SimRequest
from fxctl.sim.runner import EngineRunner, Stream
from fxctl.sim.tokens import as_token_ids, chat_prompt, output_piece

EMULATOR_HEADER = "X-Fxctl-Emulator"
EMULATOR_NOTE = "fxctl sim: emulator, simulated GPU timing (model time)"
DEFAULT_MAX_TOKENS = 16


@dataclass
class ServerConfig:
    model_name: str
    profile_name: str
    time_scale: float


class BadRequest(Exception):
    status = 400
    kind = "BadRequestError"


class UnknownModel(BadRequest):
    status = 404
    kind = "NotFoundError"


def error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": kind, "code": status}, status=status)


@web.middleware
async def label_emulator(request: web.Request, handler):
    response = await handler(request)
    if not response.prepared:  # streams set it themselves before their first byte
        response.headers[EMULATOR_HEADER] = "simulated-gpu-timing"
    return response


def build_app(engine: Engine, config: ServerConfig) -> web.Application:
    app = web.Application(middlewares=[label_emulator])
    app["engine"] = engine
    app["config"] = config

    async def start_runner(app: web.Application) -> None:
        app["runner"] = EngineRunner(engine, config.time_scale)
        app["runner"].start()

    async def stop_runner(app: web.Application) -> None:
        await app["runner"].stop()

    app.on_startup.append(start_runner)
    app.on_cleanup.append(stop_runner)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
    app.router.add_post("/reset_tiers", reset_tiers)
    app.router.add_post("/fxctl/reset_tiers", reset_tiers)
    app.router.add_get("/fxctl/info", info)
    return app


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def models(request: web.Request) -> web.Response:
    config: ServerConfig = request.app["config"]
    engine: Engine = request.app["engine"]
    return web.json_response({"object": "list", "data": [{
        "id": config.model_name, "object": "model", "created": int(time.time()), "owned_by": "fxctl-sim",
        "root": config.model_name, "max_model_len": engine.max_model_len, "fxctl_sim": EMULATOR_NOTE}]})


async def metrics(request: web.Request) -> web.Response:
    config: ServerConfig = request.app["config"]
    text = render_metrics(request.app["engine"], config.model_name, config.profile_name, config.time_scale)
    return web.Response(text=text, content_type="text/plain", charset="utf-8",
                        headers={"X-Prometheus-Format": "0.0.4"})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    """HBM prefix cache only, as vLLM's endpoint (L1/L2 stay: see /reset_tiers)."""
    dropped = request.app["engine"].reset_prefix_cache()
    return web.json_response({"reset": "hbm_prefix_cache", "blocks_dropped": dropped})


async def reset_tiers(request: web.Request) -> web.Response:
    body = await read_json(request, allow_empty=True)
    tiers = tuple(body.get("tiers", ("l1", "l2"))) if isinstance(body, dict) else ("l1", "l2")
    if not set(tiers) <= {"l1", "l2"}:
        return error(400, f"tiers must be among l1, l2 (got {list(tiers)})")
    dropped = request.app["engine"].reset_tiers(tiers)
    return web.json_response({"reset": list(tiers), "chunks_dropped": dropped})


async def info(request: web.Request) -> web.Response:
    engine: Engine = request.app["engine"]
    config: ServerConfig = request.app["config"]
    return web.json_response({
        "emulator": EMULATOR_NOTE, "profile": config.profile_name, "model": config.model_name,
        "time_scale": config.time_scale, "offload": engine.offload, "gpu_blocks": engine.pool.num_blocks,
        "block_size": engine.block_size, "model_time_s": engine.now,
        "tier_chunks": engine.tiers.chunk_counts()})


async def read_json(request: web.Request, allow_empty: bool = False):
    raw = await request.read()
    if not raw and allow_empty:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise web.HTTPBadRequest(text=json.dumps({"object": "error", "message": f"invalid JSON: {exc}"}),
                                 content_type="application/json") from exc


def parse_common(body: dict, config: ServerConfig) -> tuple[int, bool, bool]:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model", config.model_name)
    if model != config.model_name:
        raise UnknownModel(f"The model `{model}` does not exist.")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", DEFAULT_MAX_TOKENS))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer")
    if body.get("n", 1) != 1:
        raise BadRequest("the emulator serves n=1 only")
    stream = bool(body.get("stream", False))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
    return max_tokens, stream, include_usage


def completion_prompt(body: dict) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return as_token_ids(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return as_token_ids(prompt)
    raise BadRequest("prompt must be a string or a list of token ids (one prompt per request)")


async def completions(request: web.Request) -> web.StreamResponse:
    config: ServerConfig = request.app["config"]
    try:
        body = await read_json(request)
        max_tokens, stream, include_usage = parse_common(body, config)
        prompt = completion_prompt(body)
    except BadRequest as exc:
        return error(exc.status, str(exc), exc.kind)
    return await serve(request, prompt, max_tokens, stream, include_usage, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    config: ServerConfig = request.app["config"]
    try:
        body = await read_json(request)
        max_tokens, stream, include_usage = parse_common(body, config)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages must be a non-empty list of {role, content} objects")
    except BadRequest as exc:
        return error(exc.status, str(exc), exc.kind)
    return await serve(request, as_token_ids(chat_prompt(messages)), max_tokens, stream, include_usage, chat=True)


async def serve(request: web.Request, prompt: list[int], max_tokens: int, stream: bool, include_usage: bool,
                *, chat: bool) -> web.StreamResponse:
    runner: EngineRunner = request.app["runner"]
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    req = SimRequest(rid, prompt, max_tokens)
    try:
        handle = runner.submit(req)
    except RequestRejected as exc:
        return error(400, str(exc))
    shape = ResponseShape(rid, request.app["config"].model_name, chat)
    try:
        if stream:
            return await stream_response(request, handle, shape, include_usage)
        return await whole_response(handle, shape)
    finally:
        runner.cancel(req)


@dataclass
class ResponseShape:
    rid: str
    model: str
    chat: bool
    created: int = 0

    def __post_init__(self):
        self.created = int(time.time())

    def envelope(self, choices: list, **extra) -> dict:
        kind = ("chat.completion" if self.chat else "text_completion")
        if extra.pop("chunk", False) and self.chat:
            kind = "chat.completion.chunk"
        return {"id": self.rid, "object": kind, "created": self.created, "model": self.model,
                "choices": choices, **extra}

    def choice(self, text: str, finish: str | None, *, first: bool = False, whole: bool = False) -> dict:
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        if whole:
            return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                    "finish_reason": finish, "stop_reason": None}
        delta = {"role": "assistant", "content": text} if first else {"content": text}
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


def usage_of(req: SimRequest) -> dict:
    return {"prompt_tokens": req.prompt_len, "completion_tokens": req.generated,
            "total_tokens": req.prompt_len + req.generated,
            "prompt_tokens_details": {"cached_tokens": req.cached_tokens}}


def sim_figures(req: SimRequest) -> dict:
    """The request's figures in model time (what a GPU would have taken), with where its prompt came from."""
    return {"emulator": EMULATOR_NOTE, "model_ttft_s": req.ttft(), "model_e2e_s": req.e2e(),
            "prompt_tokens_from": {"hbm_prefix_cache": req.cached_tokens, **req.tier_tokens},
            "preemptions": req.preemptions}


async def stream_response(request: web.Request, handle: Stream, shape: ResponseShape,
                          include_usage: bool) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    response.headers[EMULATOR_HEADER] = "simulated-gpu-timing"
    await response.prepare(request)
    req = handle.request
    first = True
    while True:
        event = await handle.events.get()
        if event.kind == "finished":
            break
        finish = "length" if event.index >= req.max_tokens else None
        chunk = shape.envelope([shape.choice(output_piece(event.index - 1), finish, first=first)], chunk=True)
        first = False
        await send_event(response, chunk)
    if include_usage:
        await send_event(response, shape.envelope([], chunk=True, usage=usage_of(req), fxctl_sim=sim_figures(req)))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def send_event(response: web.StreamResponse, payload: dict) -> None:
    await response.write(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")


async def whole_response(handle: Stream, shape: ResponseShape) -> web.Response:
    req = handle.request
    while (await handle.events.get()).kind != "finished":
        pass
    text = "".join(output_piece(i) for i in range(req.generated))
    body = shape.envelope([shape.choice(text, req.finish_reason, whole=True)], usage=usage_of(req),
                          fxctl_sim=sim_figures(req))
    return web.json_response(body, headers={"X-Fxctl-Model-TTFT-S": f"{req.ttft():.6f}",
                                            "X-Fxctl-Model-E2E-S": f"{req.e2e():.6f}"})
