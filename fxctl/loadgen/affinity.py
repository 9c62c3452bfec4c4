"""Prefix affinity through a router, measured on the replicas themselves.

A workload of `docs` distinct long prefixes, each asked `asks` times with a different short question, sent
one request at a time through the router. Which replica served each request is read from the replicas' own
counters (vLLM's /metrics: the one whose finished-request count rose), not from the router's word, and so
are the prompt tokens each found in its own prefix cache and through its KV connector (LMCache). A policy
with prefix affinity sends every ask of a prefix to the replica that already holds it; one without spreads
them, and each replica recomputes (or fetches from LMCache) what the other one already had.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field

from fxctl.loadgen.generator import SESSION_HEADER
from fxctl.poll import poll
from fxctl.serve.replica_metrics import delta, engine_counters, hit_rates, router_counters

SOURCE_WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
                "upsilon phi chi psi omega").split()


def document(index: int, salt: str, words: int) -> str:
    """A long prefix that no other (index, salt) shares: a header and a deterministic word stream."""
    body = " ".join(SOURCE_WORDS[(index * 7 + i * i + len(salt)) % len(SOURCE_WORDS)] for i in range(words))
    return f"Document {salt}-{index}. {body}\n"


def get_text(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read().decode()


def complete(base: str, model: str, prompt: str, max_tokens: int, session: str | None = None) -> dict:
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    headers = {"Content-Type": "application/json", **({SESSION_HEADER: session} if session else {})}
    request = urllib.request.Request(f"{base}/v1/completions", body, headers)
    with urllib.request.urlopen(request, timeout=600) as answer:
        return json.loads(answer.read())


@dataclass
class AffinityRun:
    policy: str
    served_by: dict[int, list[int]] = field(default_factory=dict)   # doc -> replica index of each ask
    replicas: list[dict] = field(default_factory=list)              # per replica: counters of this run + rates
    router: dict = field(default_factory=dict)                      # worker URL -> requests (router's count)

    @property
    def docs_on_one_replica(self) -> int:
        return sum(1 for asks in self.served_by.values() if len(set(asks)) == 1)

    def to_dict(self) -> dict:
        return {"policy": self.policy, "served_by": self.served_by, "replicas": self.replicas, "router": self.router,
                "docs_on_one_replica": self.docs_on_one_replica}


def run_affinity(router_url: str, engine_urls: list[str], router_metrics_url: str | None, policy: str, *, docs: int = 3,
                 asks: int = 3, words: int = 300, salt: str = "run", max_tokens: int = 2,
                 sessions: bool = True) -> AffinityRun:
    """Send docs x asks requests through the router, one at a time (ask k of every doc before ask k+1), each
    doc a session (`sessions`: its requests carry x-session-id), and attribute each request to the replica
    whose finished-request count rose (-1: not one replica's count rose)."""
    model = json.loads(get_text(f"{router_url}/v1/models"))["data"][0]["id"]
    scrape = lambda: [engine_counters(get_text(f"{u}/metrics")) for u in engine_urls]  # noqa: E731
    start = scrape()
    router_start = router_counters(get_text(router_metrics_url)) if router_metrics_url else {}
    run = AffinityRun(policy)
    before = start
    for ask in range(asks):
        for doc in range(docs):
            complete(router_url, model, document(doc, salt, words) + f"Question {ask}: what comes next?",
                     max_tokens, f"{salt}-{doc}" if sessions else None)
            after = wait_for_one_more(scrape, before)
            rose = [i for i, (a, b) in enumerate(zip(after, before)) if a["requests"] > b["requests"]]
            run.served_by.setdefault(doc, []).append(rose[0] if len(rose) == 1 else -1)
            before = after
    for index, (url, end, begin) in enumerate(zip(engine_urls, before, start)):
        counts = delta(end, begin)
        run.replicas.append({"replica": index, "url": url, **counts, **hit_rates(counts)})
    if router_metrics_url:   # the router's own count (its metrics listen on its host's 127.0.0.1 only)
        router_end = router_counters(get_text(router_metrics_url))
        run.router = {w: c["requests"] - router_start.get(w, {}).get("requests", 0.0) for w, c in router_end.items()}
    return run


def wait_for_one_more(scrape, before: list[dict], timeout_s: float = 10.0) -> list[dict]:
    """vLLM counts a request when its output is processed: poll until the total rose by one."""
    total = sum(b["requests"] for b in before)
    seen: list[list[dict]] = []

    def rose() -> list[dict] | None:
        seen.append(scrape())
        return seen[-1] if sum(n["requests"] for n in seen[-1]) > total else None

    return poll(rose, timeout_s, every_s=0.1) or seen[-1]
