"""A small Llama made on this machine, with no download: random weights and a locally trained tokenizer.

Real vLLM on a CPU host needs a model, and hubs are out of reach here. This builds one with transformers'
`LlamaConfig` + `save_pretrained` (safetensors) and a byte-level BPE tokenizer trained with `tokenizers` on
local text (the Python standard library's sources), saved as a `PreTrainedTokenizerFast`.

Two properties matter for the measurements it serves:
- prefill of a long prompt costs clearly more than reading its KV back (layers, width and prompt length
  set the first; the KV bytes per token, 2 x layers x kv_heads x head_dim x 2 bytes, set the second);
- weights are initialised wide (initializer_range 0.5, not transformers' 0.02): with the default the
  outputs are nearly constant and cannot tell right KV from wrong KV; wide weights make wrong KV change
  the logprobs.

Run it with the serving env's python (transformers and tokenizers come with vLLM):
    python -m fxctl.serve.tiny_model DIR [--layers 6 --hidden 512 ...]
`fxctl serve make-model DIR` does that for you.
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

MARKER = "fxctl-tiny-model.json"   # written last: a folder with it holds a complete model
TINY_MODEL_NAME = "fxctl-tiny-llama"  # profiles/cpu-tiny.yaml's model: this module's model in its default folder


@dataclass(frozen=True)
class TinyModelSpec:
    layers: int = 6
    hidden: int = 512
    heads: int = 8
    kv_heads: int = 2
    intermediate: int = 1408
    vocab: int = 4096
    max_positions: int = 8192
    init_range: float = 0.5
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_bytes_per_token(self) -> int:
        """bf16 K and V of every layer for one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    def check(self) -> None:
        problems = []
        if self.hidden % self.heads:
            problems.append(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            problems.append(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.head_dim % 16:
            problems.append(f"head dim {self.head_dim} (hidden / heads) must be a multiple of 16 for vLLM's "
                            "CPU attention")
        if not 256 <= self.vocab <= 65536:
            problems.append(f"vocab {self.vocab}: 256..65536")
        if problems:
            raise ValueError("; ".join(problems))


def training_text(limit_bytes: int = 12_000_000):
    """Local text to train the tokenizer on: the standard library's Python sources (sorted: repeatable)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for path in sorted(root.rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        total += len(text)
        yield text
        if total >= limit_bytes:
            return


def build_tokenizer(spec: TinyModelSpec, out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec.vocab, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    # vLLM's chat endpoint needs a template; completions (what fxctl measures) do not use it
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant: {% endif %}")
    fast.save_pretrained(out)


def build_model(spec: TinyModelSpec, out: Path, vocab: int) -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(spec.seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
                         num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
                         num_key_value_heads=spec.kv_heads, head_dim=spec.head_dim,
                         max_position_embeddings=spec.max_positions, initializer_range=spec.init_range,
                         bos_token_id=0, eos_token_id=1, tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def make_model(out: Path, spec: TinyModelSpec) -> dict:
    """Build the model into `out` (reused when a complete one with the same spec is there)."""
    spec.check()
    marker = out / MARKER
    if marker.exists():
        try:
            existing = json.loads(marker.read_text())
            if existing.get("spec") == asdict(spec):
                return existing | {"reused": True}
        except ValueError:
            pass
    out.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    build_tokenizer(spec, out)
    from transformers import PreTrainedTokenizerFast
    vocab = len(PreTrainedTokenizerFast.from_pretrained(out))
    params = build_model(spec, out, vocab)
    info = {"path": str(out), "spec": asdict(spec), "parameters": params, "vocab": vocab,
            "kv_bytes_per_token": spec.kv_bytes_per_token}
    marker.write_text(json.dumps(info, indent=2) + "\n")
    return info | {"reused": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fxctl.serve.tiny_model", description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path)
    defaults = TinyModelSpec()
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    spec = TinyModelSpec(**{k: getattr(args, k) for k in asdict(defaults)})
    try:
        info = make_model(args.dir, spec)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
