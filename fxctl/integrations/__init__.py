"""fxctl's code that lives inside LMCache or vLLM or speaks their formats: LMCache's in-process storage plugin,
its MP server's L2 adapter, the server's command line and config (lmcache/); a KV connector for vLLM's CPU cache
and the layout it reads (vllm/). The tier itself (fxctl.kvtier) imports neither. (vLLM's platform plugin for Ray
on CPU stays at fxctl.serve.vllm_cpu_ray: it is an entry point, and serving envs made by an older fxctl name it
there.)"""
