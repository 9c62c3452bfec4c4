"""Monitoring a deployment: the Prometheus scrape targets of its endpoints (targets), alert rules (rules), a
Grafana dashboard (dashboard), the files `fxctl serve monitor` writes (files) and the live view of
`fxctl serve top` (top, screen). Every metric name comes from the module that exports it."""
