"""vLLM glue: a KV connector for vLLM's CPU cache (cpu_connector) and the cache layout it reads (cpu_layout)."""
