"""fxctl.poll: the one poll loop (issue 32 #3)."""

from __future__ import annotations

import time

import pytest

from fxctl.poll import poll, until


def test_the_first_answer_that_is_not_none_comes_back_even_a_falsy_one():
    answers = iter([None, None, [], ["model"]])
    assert poll(lambda: next(answers), 5, every_s=0.01) == []   # [] is an answer (a server with no models)


def test_no_answer_in_time_is_none_after_one_last_try_at_the_deadline():
    tries: list[float] = []
    start = time.monotonic()
    assert poll(lambda: tries.append(time.monotonic()), 0.2, every_s=0.05) is None
    assert tries[0] - start < 0.05 and tries[-1] - start >= 0.2 and 4 <= len(tries) <= 8


def test_a_zero_timeout_still_asks_once_and_ask_raises_to_give_up():
    assert poll(lambda: "ready", 0) == "ready"
    assert until(lambda: False, 0) is False

    def exited():
        raise RuntimeError("the process exited")
    with pytest.raises(RuntimeError, match="exited"):
        poll(exited, 10)
