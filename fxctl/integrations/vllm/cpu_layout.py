"""Where vLLM's CPU attention keeps each token's K and V inside its paged KV cache, learnt from its own kernel.

vLLM's CPU backend gives every layer one tensor `[num_blocks, num_kv_heads, block_size, 2 * head_size]`,
used as `[num_blocks, num_kv_heads, 2 * block_size, head_size]`: per (block, head) a page whose first
half holds K and second half V. Inside a page the order depends on the kernel's instruction-set path
(the vector paths store K transposed, V in row order; AMX tiles differ again). Rather than copy that
knowledge, `learn_layout` writes probe values through the kernel vLLM itself uses
(`cpu_attn_reshape_and_cache`) and reads where each (token-in-block, dim) landed. The result is two
index maps per (dtype, block size, head size, ISA): position in the K (or V) half of a page ->
token * head_size + dim. With them, `gather` reads tokens out of the cache in token order (vLLM -> LMCache),
in pure torch;
the way back (LMCache -> vLLM) is the kernel itself (`kernel_write`).

Probe values are small integers, exact in every float type the cache uses (bf16 holds 0..256 exactly):
one probe carries the token, a second the dim.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PageLayout:
    """K and V placement inside one (block, head) page of vLLM's CPU KV cache."""

    block_size: int
    head_size: int
    isa: str
    k_index: torch.Tensor    # [block_size * head_size]: page position -> token * head_size + dim
    v_index: torch.Tensor

    @functools.cached_property
    def k_position(self) -> torch.Tensor:
        """token * head_size + dim -> page position (the inverse map)."""
        return inverse(self.k_index)

    @functools.cached_property
    def v_position(self) -> torch.Tensor:
        return inverse(self.v_index)


def inverse(index: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(index)
    out[index] = torch.arange(index.numel())
    return out


def kernel_isa(dtype: torch.dtype, block_size: int, head_size: int) -> str:
    """The instruction-set path vLLM's CPU attention picks for this cache (its own function)."""
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    return _get_attn_isa(dtype, block_size, head_size)


def kernel_write(key: torch.Tensor, value: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor,
                 isa: str) -> None:
    """Write tokens `[n, heads, head_size]` into `cache` at `slots` with vLLM's own CPU kernel."""
    from vllm._custom_ops import cpu_attn_reshape_and_cache

    key_cache, value_cache = split_cache(cache)
    cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slots, isa)


def split_cache(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The K and V halves of one layer's cache, as the CPU backend views them."""
    blocks, heads, block_size, fused = cache.shape
    return cache.view(blocks, heads, block_size * 2, fused // 2).chunk(2, dim=2)


@functools.lru_cache(maxsize=32)
def learn_layout(dtype: torch.dtype, block_size: int, head_size: int, isa: str | None = None) -> PageLayout:
    """Probe the kernel: one block, one head; probe 1 writes the token index, probe 2 the dim index."""
    isa = isa or kernel_isa(dtype, block_size, head_size)
    tokens = torch.arange(block_size, dtype=torch.float32)
    dims = torch.arange(head_size, dtype=torch.float32)
    slots = torch.arange(block_size, dtype=torch.long)
    found = []
    for probe in (tokens[:, None].expand(block_size, head_size), dims[None, :].expand(block_size, head_size)):
        # K carries the probe; V carries the probe + 1 so an empty slot (0) is never mistaken for data
        key = probe.reshape(block_size, 1, head_size).to(dtype).contiguous()
        value = (probe + 1).reshape(block_size, 1, head_size).to(dtype).contiguous()
        cache = torch.full((1, 1, block_size, 2 * head_size), -1.0, dtype=dtype)
        kernel_write(key, value, cache, slots, isa)
        key_cache, value_cache = split_cache(cache)
        found.append((key_cache.reshape(-1).float(), value_cache.reshape(-1).float() - 1))
    (k_tok, v_tok), (k_dim, v_dim) = found
    k_index = (k_tok * head_size + k_dim).round().long()
    v_index = (v_tok * head_size + v_dim).round().long()
    for name, index in (("K", k_index), ("V", v_index)):
        if not torch.equal(torch.sort(index).values, torch.arange(block_size * head_size)):
            raise RuntimeError(f"vLLM's CPU kernel ({isa}, {dtype}, block {block_size}, head {head_size}) does "
                               f"not place {name} as a permutation of (token, dim): layout cannot be learnt")
    return PageLayout(block_size, head_size, isa, k_index, v_index)


def _pages(cache: torch.Tensor, slots: torch.Tensor):
    """Block and in-block offset of each slot, and the cache as `[blocks, heads, 2, block*head]` pages."""
    blocks, heads, block_size, fused = cache.shape
    pages = cache.view(blocks, heads, 2, block_size * (fused // 2))
    return pages, slots // block_size, slots % block_size


def gather(cache: torch.Tensor, slots: torch.Tensor, layout: PageLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the tokens at `slots`, each `[n, heads, head_size]` in token order."""
    pages, block, offset = _pages(cache, slots)
    d = layout.head_size
    positions = offset[:, None] * d + torch.arange(d)            # [n, d]: token * d + dim in token order
    selected = pages[block]                                        # [n, heads, 2, page]
    heads = selected.shape[1]
    k = selected[:, :, 0].gather(2, layout.k_position[positions][:, None, :].expand(-1, heads, -1))
    v = selected[:, :, 1].gather(2, layout.v_position[positions][:, None, :].expand(-1, heads, -1))
    return k, v
