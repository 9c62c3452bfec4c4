"""LMCache glue: fxctl's tier as the in-process storage plugin (storage_plugin) and as the MP server's L2
adapter (l2_adapter); the server's command line, ports and health (server); the in-process YAML (config)."""
