"""The tier store's metrics: prometheus_client instruments on a registry of the store's own (several stores
can live in one process), read back as the plain dict of TierStore.stats() and served over HTTP on request.

The store counts events by short names (`l1_hits`, `l2_bytes_written`, `l2_read_errors` ...); COUNTERS maps
each onto a Prometheus family and its labels. Exported families (`tier` is l1 or l2):

  fxctl_tier_hits_total, fxctl_tier_misses_total           chunks found / not found, per tier
  fxctl_tier_read_bytes_total, fxctl_tier_write_bytes_total  bytes read from / written into a tier
  fxctl_tier_stored_chunks_total, fxctl_tier_evicted_total   chunks written into / evicted from a tier
  fxctl_tier_demoted_total, fxctl_tier_promoted_total, fxctl_tier_dropped_total   moves between tiers
  fxctl_tier_errors_total{tier="l2",kind=...}              read, write, enospc, checksum, checkpoint, open ...
  fxctl_tier_skipped_writes_total, fxctl_tier_queue_full_total, fxctl_tier_puts_total
  fxctl_tier_put_bytes_total                               bytes put (L2 write amplification: l2 write_bytes / this)
  fxctl_tier_admissions_refused_total{tier="l2"}           puts and evictions the admission policy kept out of L2
  fxctl_tier_read_latency_seconds{tier}                    histogram of chunk reads
  fxctl_tier_op_latency_seconds{op}                        histogram of put, l2_write, contains
  fxctl_tier_usage_bytes, fxctl_tier_max_capacity_bytes, fxctl_tier_chunks   gauges, read at scrape time
  fxctl_tier_pending_write_bytes, fxctl_tier_pinned_chunks

The hit, miss, read-bytes and chunk names are those fxctl sim exports, so `fxctl bench serve` reads per-tier
hit rates from either. Aligned with LMCache's MP metrics where they count the same thing (lmcache/v1/
mp_observability/subscribers/metrics/*.py, l1_eviction_loop.py, storage_manager.py; the OTel names reach
Prometheus with dots as underscores and the unit appended): usage_bytes as lmcache_mp_l2_usage_bytes and
lmcache_mp_l1_memory_usage_bytes, max_capacity_bytes as the L2 adapters' max_capacity_bytes, evicted as
lmcache_mp_l1_evicted / l2_evicted_objects. LMCache's l1_read / l1_write / l2_store_completed_objects count
its own L1 and the L2 controller; fxctl's hits / stored_chunks count inside the adapter, so both show.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

PREFIX = "fxctl_tier"

# upper bounds of the latency buckets, in seconds
LATENCY_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0, 10.0)

L1, L2 = {"tier": "l1"}, {"tier": "l2"}

# the store's event name -> (Prometheus family without prefix and _total, labels)
COUNTERS: dict[str, tuple[str, dict[str, str]]] = {
    "l1_hits": ("hits", L1), "l2_hits": ("hits", L2),
    "l1_misses": ("misses", L1), "l2_misses": ("misses", L2),
    "l1_bytes_read": ("read_bytes", L1), "l2_bytes_read": ("read_bytes", L2),
    "l1_bytes_written": ("write_bytes", L1), "l2_bytes_written": ("write_bytes", L2),
    "l1_stores": ("stored_chunks", L1), "l2_stores": ("stored_chunks", L2),
    "l1_evictions": ("evicted", L1), "l2_evictions": ("evicted", L2),
    "l1_demotions": ("demoted", L1), "l1_dropped": ("dropped", L1), "l2_promotions": ("promoted", L2),
    "l2_skipped_writes": ("skipped_writes", L2), "l2_queue_full": ("queue_full", L2),
    "puts": ("puts", {}), "put_bytes": ("put_bytes", {}),
    "l2_admissions_refused": ("admissions_refused", L2),
    "model_mismatches": ("model_mismatches", {}),
    **{f"l2_{name}": ("errors", {"tier": "l2", "kind": kind}) for name, kind in (
        ("read_errors", "read"), ("write_errors", "write"), ("enospc", "enospc"),
        ("checksum_failures", "checksum"), ("checkpoint_errors", "checkpoint"), ("open_failures", "open"),
        ("manifest_damaged", "manifest_damaged"), ("unverifiable", "unverifiable"))},
}

HELP = {
    "hits": "Chunks found in the tier", "misses": "Chunks looked up in the tier and not found",
    "read_bytes": "Bytes of chunks read from the tier", "write_bytes": "Bytes of chunks written into the tier",
    "stored_chunks": "Chunks written into the tier", "evicted": "Chunks evicted from the tier",
    "demoted": "Chunks evicted from L1 and queued for L2", "dropped": "Chunks evicted from L1 that L2 did not get",
    "promoted": "Chunks copied up from L2 into L1 after repeated hits",
    "skipped_writes": "Chunks not written to L2 (queue full or an error)",
    "queue_full": "Puts that found the write-behind queue full", "puts": "Chunks put into the store",
    "put_bytes": "Bytes of chunks put into the store (write amplification: write_bytes{tier=l2} / put_bytes)",
    "admissions_refused": "Puts and L1 evictions the L2 admission policy did not write (l2_admission)",
    "errors": "Errors of the tier, by kind (an error is a miss or a skipped write, never the caller's)",
    "model_mismatches": "Chunks looked up and missed that the tier holds for the same key under other weights "
                        "(another model fingerprint): never served, counted",
    "events": "Other events of the tier store",
}

# the store's latency name -> (histogram family, labels)
HISTOGRAMS: dict[str, tuple[str, dict[str, str]]] = {
    "get_l1": ("read_latency_seconds", L1), "get_l2": ("read_latency_seconds", L2),
    "put": ("op_latency_seconds", {"op": "put"}), "l2_write": ("op_latency_seconds", {"op": "l2_write"}),
    "contains": ("op_latency_seconds", {"op": "contains"}),
}


def _labels_key(labels: dict[str, str]) -> tuple:
    return tuple(sorted(labels.items()))


class TierMetrics:
    """Counters and latency histograms of one store, in prometheus_client instruments on `registry`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        families: dict[str, Counter] = {}
        for family, labels in COUNTERS.values():
            if family not in families:
                families[family] = Counter(f"{PREFIX}_{family}", HELP[family], sorted(labels), registry=self.registry)
        families["events"] = Counter(f"{PREFIX}_events", HELP["events"], ["event"], registry=self.registry)
        self._families = families
        self._counters = {name: families[f].labels(**labels) if labels else families[f]
                          for name, (f, labels) in COUNTERS.items()}
        # reverse map for stats(): (sample name, labels) -> the store's event name
        self._counter_names = {(f"{PREFIX}_{f}_total", _labels_key(labels)): name
                               for name, (f, labels) in COUNTERS.items()}
        hists = {
            "read_latency_seconds": Histogram(f"{PREFIX}_read_latency_seconds", "Latency of chunk reads",
                                              ["tier"], registry=self.registry, buckets=LATENCY_BOUNDS),
            "op_latency_seconds": Histogram(f"{PREFIX}_op_latency_seconds", "Latency of the store's operations",
                                            ["op"], registry=self.registry, buckets=LATENCY_BOUNDS),
        }
        self._histograms = {name: hists[f].labels(**labels) for name, (f, labels) in HISTOGRAMS.items()}
        self._histogram_names = {(f"{PREFIX}_{f}", _labels_key(labels)): name
                                 for name, (f, labels) in HISTOGRAMS.items()}

    def add(self, name: str, value: int = 1) -> None:
        counter = self._counters.get(name)
        if counter is None:  # a name without a family of its own: counted, never lost
            with self._lock:
                counter = self._counters.setdefault(name, self._families["events"].labels(event=name))
                self._counter_names[(f"{PREFIX}_events_total", (("event", name),))] = name
        counter.inc(value)

    def observe(self, name: str, seconds: float) -> None:
        self._histograms[name].observe(seconds)

    def watch(self, read_usage: Callable[[], dict]) -> None:
        """Export the gauges from `read_usage()` (TierStore.usage()) at every scrape."""
        self.registry.register(UsageCollector(read_usage))

    def snapshot(self) -> dict:
        """{"counters": {event: value} (non-zero ones), "latency": {name: {count, sum_s, buckets, p50_s, p99_s}}}."""
        counters: dict[str, int] = {}
        hists: dict[str, dict] = {name: {"count": 0, "sum_s": 0.0, "buckets": {}} for name in HISTOGRAMS}
        for metric in self.registry.collect():
            for s in metric.samples:
                labels = dict(s.labels)
                if metric.type == "counter":
                    name = self._counter_names.get((s.name, _labels_key(labels)))
                    if name is not None and s.value:
                        counters[name] = int(s.value)
                elif metric.type == "histogram":
                    le = labels.pop("le", None)
                    name = self._histogram_names.get((metric.name, _labels_key(labels)))
                    if name is None:
                        continue
                    if s.name.endswith("_bucket"):
                        hists[name]["buckets"][le] = int(s.value)
                    elif s.name.endswith("_count"):
                        hists[name]["count"] = int(s.value)
                    elif s.name.endswith("_sum"):
                        hists[name]["sum_s"] = round(s.value, 6)
        for h in hists.values():
            h["p50_s"], h["p99_s"] = quantile(h, 0.5), quantile(h, 0.99)
        return {"counters": dict(sorted(counters.items())), "latency": hists}


def quantile(hist: dict, q: float) -> float | None:
    """Upper bound of the bucket holding the q-quantile of a snapshot histogram (None without samples)."""
    if not hist["count"]:
        return None
    rank = q * hist["count"]
    for le, cumulative in sorted(hist["buckets"].items(), key=lambda kv: float(kv[0])):
        if cumulative >= rank:
            return float(le)
    return float("inf")


class UsageCollector:
    """Gauges of what the store holds now, read from the store at scrape time."""

    def __init__(self, read_usage: Callable[[], dict]):
        self.read_usage = read_usage

    def describe(self) -> Iterable[Metric]:
        return []  # read at scrape time; nothing to check for clashes

    def collect(self) -> Iterable[Metric]:
        usage = self.read_usage()
        used = GaugeMetricFamily(f"{PREFIX}_usage_bytes", "Bytes the tier holds now", labels=["tier"])
        capacity = GaugeMetricFamily(f"{PREFIX}_max_capacity_bytes", "Capacity of the tier in bytes", labels=["tier"])
        chunks = GaugeMetricFamily(f"{PREFIX}_chunks", "Chunks the tier holds now", labels=["tier"])
        for tier in ("l1", "l2"):
            u = usage.get(tier)
            if u is None:
                continue
            used.add_metric([tier], u["used_bytes"])
            capacity.add_metric([tier], u["capacity_bytes"])
            chunks.add_metric([tier], u["chunks"])
        yield from (used, capacity, chunks)
        yield GaugeMetricFamily(f"{PREFIX}_pending_write_bytes", "Bytes queued for the write-behind to L2",
                                value=usage["write_behind"]["bytes"])
        yield GaugeMetricFamily(f"{PREFIX}_pinned_chunks", "Chunks pinned by lookups", value=usage["pinned_chunks"])


class MetricsServer:
    """A Prometheus /metrics endpoint (prometheus_client's HTTP server on a thread) for one or more registries."""

    def __init__(self, port: int, *registries, host: str = "127.0.0.1"):
        self.registries = registries
        self.httpd, self.thread = start_http_server(port, addr=host, registry=self)
        self.host, self.port = host, self.httpd.server_address[1]

    def collect(self) -> Iterable[Metric]:
        for registry in self.registries:
            yield from registry.collect()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve_metrics(port: int | None, *registries, host: str = "127.0.0.1") -> MetricsServer | None:
    """Serve the registries' metrics on host:port (None when port is 0 or None: no endpoint)."""
    if not port:
        return None
    return MetricsServer(int(port), *registries, host=host)


SUMMARY_FIELDS = {"hits": "hits_total", "misses": "misses_total", "read_bytes": "read_bytes_total",
                  "write_bytes": "write_bytes_total", "chunks": "chunks", "usage_bytes": "usage_bytes",
                  "max_capacity_bytes": "max_capacity_bytes", "errors": "errors_total",
                  "reads": "read_latency_seconds_count", "read_seconds": "read_latency_seconds_sum"}


def tier_summary(text: str) -> dict[str, dict[str, float]]:
    """Per tier from a scrape of the tier's endpoint (prometheus_client's parser): hits, misses, hit_rate,
    read/write bytes, chunks, usage and capacity bytes, errors (all kinds), reads and mean_read_s.
    For `fxctl serve status`: {"l1": {...}, "l2": {...}}; tiers absent from the text are left out."""
    wanted = {f"{PREFIX}_{suffix}": field for field, suffix in SUMMARY_FIELDS.items()}
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            field, tier = wanted.get(s.name), s.labels.get("tier")
            if field and tier:
                row = out.setdefault(tier, dict.fromkeys(SUMMARY_FIELDS, 0.0))
                row[field] += s.value
    for row in out.values():
        looked = row["hits"] + row["misses"]
        row["hit_rate"] = row["hits"] / looked if looked else None
        row["mean_read_s"] = row.pop("read_seconds") / row["reads"] if row["reads"] else None
    return out
