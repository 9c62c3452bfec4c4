"""Prefix affinity through fxctl serve's router: how each routing policy spreads requests over real vLLM
replicas and how much of each prompt a replica then finds in its own prefix cache.

One deployment on this machine (`fxctl serve`, profile cpu-tiny: real vLLM on CPU, the tiny model, two
replicas sharing one LMCache server with fxctl's tier as its L2), the router restarted per policy through
fxctl serve (the engines keep running). Each (repeat, policy) sends its own fresh prefixes (nothing a
replica holds from an earlier run is reused): `--docs` prefixes of about 770 tokens, each asked `--asks`
times, one request at a time; which replica served each request and the hits are read from the replicas'
own /metrics (fxctl.loadgen.affinity). The policies' order alternates between repeats. Printed per policy:
the requests per replica, how many prefixes stayed on one replica, the share of prompt tokens found in the
replica's own prefix cache, and the share of the tokens it asked LMCache for that LMCache had
(min / median / max over the repeats).

    flock /tmp/fxctl-heavy.lock python -m benchmarks.router_affinity [--policies consistent_hash,round_robin]
        [--repeats 3] [--docs 4] [--asks 4] [--json FILE]

Each prefix is a session: its requests carry x-session-id (what consistent_hash keys on).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace

from tabulate import tabulate

from fxctl.loadgen.affinity import run_affinity
from fxctl.serve import deploy
from fxctl.serve.router import router_port, switch_local_policy

PORT = 8251


def deployment(python: str, model: str, l2_dir: str):
    from fxctl.serve.settings import settings_from
    from fxctl.sim.profile import load_profile

    settings = settings_from(load_profile("cpu-tiny"), name="affinity", model=model, python=python, l2_dir=l2_dir,
                             port=PORT, instances=2, state_dir=deploy.local_state_dir())
    return replace(settings, router=replace(settings.router, mode="on"))


def spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def share(rows: list[dict], hits: str, queries: str) -> float:
    asked = sum(r[queries] for r in rows)
    return sum(r[hits] for r in rows) / asked if asked else 0.0


def main() -> None:
    from fxctl.cli.serve_env_cmd import serving_python
    from fxctl.paths import tiny_model_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="consistent_hash,cache_aware,round_robin")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--docs", type=int, default=4)
    parser.add_argument("--asks", type=int, default=4)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    policies = args.policies.split(",")
    settings = deployment(serving_python(None), str(tiny_model_dir()), tempfile.mkdtemp(prefix="fxctl-affinity-"))
    router = f"http://127.0.0.1:{router_port(settings)}"
    engines = [f"http://127.0.0.1:{PORT + i}" for i in range(settings.instances)]
    started = deploy.start(settings, deploy.Where())["local"]
    if not started.ok:
        raise SystemExit(f"starting the deployment failed: {started.error}")
    runs = []
    try:
        for repeat in range(args.repeats):
            order = policies if repeat % 2 == 0 else list(reversed(policies))
            for policy in order:
                switch_local_policy(router, policy)
                run = run_affinity(router, engines, f"http://127.0.0.1:{router_port(settings) + 1}/metrics", policy,
                                   docs=args.docs, asks=args.asks, salt=f"r{repeat}-{policy}")
                runs.append({"repeat": repeat, **run.to_dict()})
                print(f"repeat {repeat} {policy}: served_by {run.served_by}", flush=True)
    finally:
        deploy.stop(deploy.Where(), settings.state_dir, settings.name)
    rows = []
    for policy in policies:
        mine = [r for r in runs if r["policy"] == policy]
        rows.append([policy,
                     " / ".join(spread([r["replicas"][i]["requests"] for r in mine], ".0f")
                                for i in range(settings.instances)),
                     spread([r["docs_on_one_replica"] for r in mine], ".0f") + f" of {args.docs}",
                     spread([100 * share(r["replicas"], "prefix_hits", "prefix_queries") for r in mine], ".0f"),
                     spread([100 * share(r["replicas"], "external_hits", "external_queries") for r in mine], ".0f")])
    print(tabulate(rows, ["policy", "requests per replica", "prefixes on one replica", "own prefix cache %",
                          "LMCache had % (of what was asked)"]))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "runs": runs}, out, indent=1)


if __name__ == "__main__":
    main()
