"""The router's settings, declared once: policies, default policy, when a router is deployed, its port.

A leaf module (no fxctl imports): the inventory's `serve.router`, the profile's `serving.router` and the
command line all validate against these names; fxctl.serve.router plans and runs the router.

Policies are vllm-router's own (its --policy), minus the two that need more than a list of workers:
`kv_aware` (it subscribes to every vLLM's KV-event ZMQ stream) and `sticky_least_loaded` (sessions named by
a request header the OpenAI clients do not send).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass

POLICIES = ("consistent_hash", "cache_aware", "round_robin", "random", "power_of_two")
# consistent_hash: a session header (x-session-id) pins a session's requests to one replica (its prefix stays
# there), else the hash of the request's text (the same prompt, e.g. a replay after a restart, goes where its
# KV was stored); sessions and prompts spread over the replicas. Not cache_aware, vllm-router's own default:
# measured with 0.1.17 and a static worker list, it sent every request to one worker (its prefix tree keeps
# only the last worker it initialised: the router logs "Creating tree for model key 'default' with 1 workers"
# once per worker), with 2 and with 3 workers, vLLM or the emulator behind it.
DEFAULT_POLICY = "consistent_hash"
MODES = ("auto", "on", "off")      # auto: a router when the deployment has more than one engine in total
PORT_OFFSET = 80                   # router port = first vLLM port + 80 (8080); its Prometheus metrics: + 1


@dataclass(frozen=True)
class RouterSettings:
    mode: str = "auto"
    policy: str = DEFAULT_POLICY
    port: int | None = None        # None: the deployment's first vLLM port + PORT_OFFSET
    host: str | None = None        # inventory host that runs it; None: the first serving host

    def problems(self) -> list[str]:
        found = []
        if self.mode not in MODES:
            found.append(f"router mode {self.mode!r}: one of {', '.join(MODES)}")
        if self.policy not in POLICIES:
            found.append(f"router policy {self.policy!r}: one of {', '.join(POLICIES)}")
        if self.port is not None and (isinstance(self.port, bool) or not isinstance(self.port, int)
                                      or not 1 <= self.port <= 65534):
            found.append(f"router port {self.port!r}: 1..65534 (its metrics take the next port)")
        return found


def resolve(profile_policy: str | None, spec, given: dict) -> RouterSettings:
    """Each layer wins where it set a value: the profile's serving.router.policy, the inventory's
    serve.router (policy, port, host, mode: a dict or the inventory's RouterSpec), then the command line
    (router_mode, router_policy, router_port)."""
    spec = asdict(spec) if is_dataclass(spec) else (spec or {})
    pick = lambda key, flag: given.get(flag, spec.get(key))  # noqa: E731
    return RouterSettings(mode=pick("mode", "router_mode") or "auto",
                          policy=pick("policy", "router_policy") or profile_policy or DEFAULT_POLICY,
                          port=pick("port", "router_port"), host=spec.get("host"))
