"""Acceptance: the real `openai` client streams tokens from `fxctl sim serve` (skipped only without openai)."""

import pytest

from .support import sim_server

openai = pytest.importorskip("openai")

MODEL = "fxctl-sim/lab-0.5b"


def test_openai_client_streams_completions_and_chat_with_usage():
    with sim_server("lab") as server:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="not-needed", max_retries=0)
        assert [m.id for m in client.models.list()] == [MODEL]

        stream = client.completions.create(model=MODEL, prompt="Where does cold KV live?", max_tokens=6,
                                           stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        assert len([c for c in chunks if c.choices]) == 6 and text
        assert chunks[-1].usage.completion_tokens == 6

        chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=4, stream=True, stream_options={"include_usage": True})
        chat_chunks = list(chat)
        deltas = [c.choices[0].delta.content for c in chat_chunks if c.choices]
        assert len(deltas) == 4 and chat_chunks[-1].usage.total_tokens == chat_chunks[-1].usage.prompt_tokens + 4

        whole = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=3)
        assert whole.choices[0].message.role == "assistant" and whole.usage.completion_tokens == 3
        assert whole.choices[0].finish_reason == "length"
