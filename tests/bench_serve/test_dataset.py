"""bench serve --dataset: the prompts of a JSONL file (the one vLLM bench and GuideLLM read), sent as written."""

import json

import pytest
from click.testing import CliRunner

from fxctl.cli import cli
from fxctl.errors import BadInput
from fxctl.loadgen.workloads import WorkloadSpec, dataset_prompts, read_dataset
from fxctl.sim.tokens import tokenize
from fxctl.tune.server import ServerProcess, sim_argv

TEXTS = ["the quick brown fox", "jumps over the lazy dog again and again", "a b c d e f g", "one more prompt here"]


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": t, "output_tokens_count": 4}) + "\n" for t in TEXTS))
    return path


def test_lines_are_read_in_order_and_sent_as_written(dataset):
    assert read_dataset(str(dataset)) == TEXTS
    spec = WorkloadSpec("long-context", output_tokens=5, dataset=str(dataset))
    prompts = dataset_prompts(spec, 1, 2, "m")
    bodies = [json.loads(p.body) for p in prompts]
    assert [b["prompt"] for b in bodies] == TEXTS[1:3]
    assert [p.index for p in prompts] == [1, 2]
    assert all(b["max_tokens"] == b["min_tokens"] == 5 and b["model"] == "m" and b["stream"] for b in bodies)
    with pytest.raises(ValueError, match="3 prompts needed from line 3 on, the file has 4"):
        dataset_prompts(spec, 2, 3, None)


@pytest.mark.parametrize("text, where", [('{"prompt": "ok"}\n[1, 2]\n', ":2:"), ('{"text": "x"}\n', ":1:"),
                                         ('{"prompt": ""}\n', ":1:"), ("\n\n", "no prompts")])
def test_a_bad_line_is_named(tmp_path, text, where):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match=where):
        read_dataset(str(path))


def test_dataset_is_for_long_context_only(dataset):
    with pytest.raises(ValueError, match="long-context"):
        WorkloadSpec("multi-turn", dataset=str(dataset))


def test_cli_sends_the_file_after_the_warmup_lines(dataset, tmp_path):
    out = tmp_path / "result.json"
    with ServerProcess(sim_argv("fixed-delays", 1.0)) as server:
        result = CliRunner().invoke(cli, ["bench", "serve", "--url", server.url, "--dataset", str(dataset),
                                          "--warmup", "1", "--requests", "3", "--output-tokens", "4",
                                          "--concurrency", "2", "--result-file", str(out)])
        too_many = CliRunner().invoke(cli, ["bench", "serve", "--url", server.url, "--dataset", str(dataset),
                                            "--warmup", "2", "--requests", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["completed"] == 3 and data["failed"] == 0
    # the server's count of the prompt tokens it received: exactly lines 2-4 of the file
    assert data["total_input_tokens"] == sum(len(tokenize(t)) for t in TEXTS[1:])
    assert data["total_output_tokens"] == 3 * 4
    assert isinstance(too_many.exception, BadInput) and too_many.exception.exit_code == 2   # main() exits 2
    assert "--warmup 2 + --requests 3 prompts needed, the file has 4" in too_many.exception.message
