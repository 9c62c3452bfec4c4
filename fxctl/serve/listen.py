"""Where a deployment's metrics endpoints listen, declared once (a leaf module: the inventory and the
command line validate against it). vLLM listens on every interface (it is the endpoint); fxctl's tier (in
the LMCache server) and vllm-router's metrics listen on loopback unless serve.metrics_address says 0.0.0.0,
for a Prometheus on another machine (`fxctl serve monitor`). fxctl probes them on 127.0.0.1 either way."""

LOOPBACK = "127.0.0.1"
METRICS_ADDRESSES = (LOOPBACK, "0.0.0.0")
