"""Runs in the serving env (vLLM importable): fxctl's CPU KV layout against vLLM's own kernel.

Prints one JSON line: per (dtype, block size, head size) whether tokens written by the kernel read back
exactly through fxctl's learnt layout, whether a connector round trip (load through the kernel, store
through the layout) returns the memory object's bytes, and two negative controls (a row-order K layout
and a layout shifted by one token) that must NOT read back the same values.
"""

import json
import sys

import torch

from fxctl.integrations.vllm.cpu_connector import CpuPagedConnector
from fxctl.integrations.vllm.cpu_layout import PageLayout, gather, kernel_write, learn_layout


class MemoryObj:   # the one attribute of LMCache's MemoryObj the connector uses
    def __init__(self, tensor):
        self.tensor = tensor


def case(dtype, block_size, head_size, heads=2, blocks=6, layers=3):
    torch.manual_seed(block_size * 1000 + head_size)
    layout = learn_layout(dtype, block_size, head_size)
    n = 3 * block_size - 5                                   # partial blocks at both ends
    slots = torch.randperm(blocks * block_size)[:n]
    key = torch.randn(n, heads, head_size).to(dtype)
    value = torch.randn(n, heads, head_size).to(dtype)
    cache = torch.zeros(blocks, heads, block_size, 2 * head_size, dtype=dtype)
    kernel_write(key, value, cache, slots, layout.isa)
    k, v = gather(cache, slots, layout)
    identity = torch.arange(block_size * head_size)
    row_order = PageLayout(block_size, head_size, layout.isa, identity, layout.v_index)
    shifted = PageLayout(block_size, head_size, layout.isa, torch.roll(layout.k_index, head_size),
                         torch.roll(layout.v_index, head_size))
    wrong = {}
    for name, bad in (("row_order_k", row_order), ("shifted_token", shifted)):
        bk, bv = gather(cache, slots, bad)
        wrong[name] = bool(torch.equal(bk, key) and torch.equal(bv, value))
    # the connector: memory object -> cache (vLLM's kernel) -> memory object (the learnt layout)
    caches = [torch.zeros(blocks, heads, block_size, 2 * head_size, dtype=dtype) for _ in range(layers)]
    connector = CpuPagedConnector(layers, heads, head_size, dtype)
    source = MemoryObj(torch.randn(2, layers, n, heads * head_size).to(dtype))
    target = MemoryObj(torch.zeros_like(source.tensor))
    full_slots = torch.cat([torch.full((7,), -1), slots])   # a whole-sequence slot mapping; chunk at 7..7+n
    connector.to_gpu(source, 7, 7 + n, kvcaches=caches, slot_mapping=full_slots)
    connector.from_gpu(target, 7, 7 + n, kvcaches=caches, slot_mapping=full_slots)
    return {"dtype": str(dtype).removeprefix("torch."), "block_size": block_size, "head_size": head_size,
            "isa": layout.isa, "k_row_order": bool(torch.equal(layout.k_index, identity)),
            "reads_back": bool(torch.equal(k, key) and torch.equal(v, value)),
            "connector_round_trip": bool(torch.equal(source.tensor, target.tensor)),
            "wrong_layout_reads_back": wrong}


def main():
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for block_size in (16, 32, 128):
            for head_size in (64, 128):
                cases.append(case(dtype, block_size, head_size))
    print(json.dumps(cases))


if __name__ == "__main__":
    sys.exit(main())
