"""Bounded calls in exact words and threads: the timeout names what gave no answer (default
"the call"), a failure keeps its exception, the call runs in a named daemon thread, an error
inside the async daemon thread reaches the awaiting task (kills the mutants of plan.py that
test_plan.py leaves)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from llama_index_ext_advrag.plan import (
    Failed,
    StepTimeoutError,
    aattempt,
    arun_within,
    as_failed,
    attempt,
    in_daemon_thread,
    run_within,
)


def slow() -> None:
    time.sleep(1)


async def aslow() -> None:
    await asyncio.sleep(1)


def test_timeouts_name_what_gave_no_answer() -> None:
    with pytest.raises(StepTimeoutError) as error:
        run_within(slow, 0.05)
    assert str(error.value) == "the call gave no answer within 0.05 s"
    assert (error.value.what, error.value.seconds) == ("the call", 0.05)
    with pytest.raises(StepTimeoutError) as error:
        asyncio.run(arun_within(aslow, 0.05))
    assert str(error.value) == "the call gave no answer within 0.05 s"
    with pytest.raises(StepTimeoutError, match="^the judge gave no answer within 0.05 s$"):
        asyncio.run(arun_within(aslow, 0.05, "the judge"))
    with pytest.raises(StepTimeoutError, match="^the call gave no answer within 0 s$"):
        asyncio.run(arun_within(aslow, 0))


def test_attempts_name_the_step_and_keep_the_exception() -> None:
    timed_out = attempt("judge", slow, 0.05)
    assert timed_out == Failed("judge timed out after 0.05 s", timed_out=True, step="judge")
    assert isinstance(timed_out.exception, StepTimeoutError)
    assert str(timed_out.exception) == "the judge gave no answer within 0.05 s"
    atimed_out = asyncio.run(aattempt("judge", aslow, 0.05))
    assert str(atimed_out.exception) == "the judge gave no answer within 0.05 s"
    error = ValueError("bad")
    failed = as_failed("retrieve", error)
    assert failed == Failed("retrieve failed: ValueError('bad')", step="retrieve")
    assert failed.exception is error


def test_bounded_calls_run_in_named_daemon_threads() -> None:
    def where() -> tuple[str, bool]:
        thread = threading.current_thread()
        return thread.name, thread.daemon

    assert run_within(where, 5) == ("advrag-bounded-call", True)
    assert asyncio.run(in_daemon_thread(where)) == ("advrag-async-call", True)


def test_an_error_in_the_async_thread_reaches_the_task() -> None:
    def boom() -> None:
        raise KeyError("lost")

    with pytest.raises(KeyError, match="lost"):
        asyncio.run(in_daemon_thread(boom))
    assert asyncio.run(in_daemon_thread(lambda: 7)) == 7


def test_an_llm_completion_call_is_bounded_and_times_out_as_a_client_would() -> None:
    """llm_completion's Call runs complete/acomplete with the prompt, bounded by its timeout; a
    timeout is a plain TimeoutError naming the LLM and the bound (sync and async)."""
    import asyncio
    import time as _time

    from llama_index_ext_advrag.plan import StepTimeoutError as _Step
    from llama_index_ext_advrag.plan import arun_call as _arun
    from llama_index_ext_advrag.plan import llm_completion as _completion
    from llama_index_ext_advrag.plan import run_call as _run

    class SlowLLM:
        def complete(self, prompt: str) -> str:
            _time.sleep(0.3)
            return prompt

        async def acomplete(self, prompt: str) -> str:
            await asyncio.sleep(0.3)
            return prompt

    call = _completion(SlowLLM(), "p", 0.05)
    assert (call.timeout, call.what) == (0.05, "the LLM")
    for run in (lambda: _run(call), lambda: asyncio.run(_arun(call))):
        with pytest.raises(TimeoutError) as caught:
            run()
        assert not isinstance(caught.value, _Step)
        assert str(caught.value) == "the LLM gave no answer within 0.05 s"
    assert _run(_completion(SlowLLM(), "p", None)) == "p"
    assert asyncio.run(_arun(_completion(SlowLLM(), "p", None))) == "p"
