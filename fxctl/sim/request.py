"""One request's life in the emulated engine: waiting -> (loading from tiers) -> running -> finished."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fxctl.sim.tokens import block_hashes

WAITING, LOADING, RUNNING, FINISHED = "waiting", "loading", "running", "finished"


@dataclass
class SimRequest:
    id: str
    prompt: list[int]
    max_tokens: int
    arrival: float = 0.0
    sink: Callable[[str, SimRequest], None] | None = None  # called with "token" and "finished"
    state: str = WAITING
    blocks: list[int] = field(default_factory=list)
    computed: int = 0              # tokens whose KV is in HBM
    prefill_target: int = 0        # tokens to compute before the next token is sampled
    generated: int = 0
    first_token_at: float | None = None
    finished_at: float | None = None
    last_token_at: float | None = None
    cached_tokens: int = 0         # prompt tokens found in the HBM prefix cache at first admission
    tier_tokens: dict[str, int] = field(default_factory=dict)   # prompt tokens loaded per tier
    pending_transfers: set = field(default_factory=set)
    preemptions: int = 0
    offloaded: bool = False
    registered_blocks: int = 0
    finish_reason: str | None = None
    block_keys: list[bytes] = field(default_factory=list)
    chunk_keys: list[bytes] = field(default_factory=list)

    def __post_init__(self):
        self.prefill_target = len(self.prompt)

    def hash_prompt(self, block_size: int, chunk_tokens: int) -> None:
        if not self.block_keys:  # callers replaying a prompt may pass its keys along
            self.block_keys = block_hashes(self.prompt, block_size)
        per_chunk = max(chunk_tokens // block_size, 1)
        self.chunk_keys = self.block_keys[per_chunk - 1::per_chunk]

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def in_prefill(self) -> bool:
        return self.computed < self.prefill_target

    def ttft(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.arrival

    def e2e(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.arrival
