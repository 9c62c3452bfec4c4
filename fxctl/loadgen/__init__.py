"""The HTTP load generator (`fxctl bench serve`, `fxctl bench cold-restart`, tune's trials): open- or closed-loop
load against an OpenAI-compatible server, per-request records, latency summaries and SLO limits."""
