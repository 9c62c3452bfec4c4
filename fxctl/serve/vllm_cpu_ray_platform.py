"""vLLM's CPU platform whose workers Ray places by its GPU slots (see fxctl.serve.vllm_cpu_ray). Imports vLLM."""

from __future__ import annotations

from vllm.platforms.cpu import CpuPlatform


class CpuRayPlatform(CpuPlatform):
    ray_device_key = "GPU"   # Ray's resource that vLLM's Ray executor asks one of per worker (ray_utils, ray_executor)
