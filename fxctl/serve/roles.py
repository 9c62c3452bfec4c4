"""What each process of a deployment is. One name per role; the value is what `fxctl serve` writes into an
instance's state file (instance.json) and prints in `serve status -o json` (`role`; `engine` says which engine,
vllm or sim, a process belongs to)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    ENGINE = "engine"                  # vLLM, or fxctl's emulator, answering requests
    LMCACHE_SERVER = "lmcache-server"  # MP mode: the host's `lmcache server`, fxctl's tier its L2 adapter
    ROUTER = "router"                  # vllm-router in front of a deployment's engines
    RAY_HEAD = "ray-head"              # a Ray deployment's head node (its vLLM runs beside it)
    RAY_WORKER = "ray-worker"          # a Ray deployment's other nodes


RAY = (Role.RAY_HEAD, Role.RAY_WORKER)

# where each role's processes are listed (serve status) among a deployment's: the cluster first, then what
# stands in front of the engines, the engines last
LISTING = {Role.RAY_HEAD: 0, Role.RAY_WORKER: 1, Role.ROUTER: 2, Role.LMCACHE_SERVER: 3, Role.ENGINE: 4}
