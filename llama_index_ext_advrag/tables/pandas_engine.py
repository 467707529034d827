"""A pandas query engine that runs LLM-written code only if it is allowed, and only in a sandbox.

:class:`SafePandasQueryEngine` is a drop-in for llama-index-experimental's
``PandasQueryEngine`` (same constructor arguments, prompts and metadata keys) that never imports
that package: the LLM writes pandas code, :func:`~.pandas_check.check_pandas_code` accepts it
only if every part of it is on the allowlist, and :func:`~.pandas_sandbox.run_pandas_code` runs
it in a child process with CPU, memory, file and time limits. Refusal is a normal outcome: the
refusal reason (or the error) is sent back to the LLM once; if the second program fails too,
the answer is the table's description, and the trace records every program and why it did not
give an answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.configuration import Configured, PromptSetting
from llama_index_ext_advrag.events import PandasQueryEvent
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.plan import Call, adrive, arun_call, drive, run_call
from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.tables.pandas_check import refusal_reason
from llama_index_ext_advrag.tables.pandas_sandbox import (
    SandboxLimits,
    SandboxResult,
    arun_pandas_code,
    run_pandas_code,
)
from llama_index_ext_advrag.trace import TRACE_KEY

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "pandas"
DEFAULT_MAX_RETRIES = 1
MAX_TRACED_CODE_CHARS = 2_000
MAX_TRACED_VALUE_CHARS = 20_000  # the answer's value is kept in the trace up to this much JSON
DEFAULT_INSTRUCTION_STR = (
    "1. Write Python code with pandas that computes the answer to the query from `df`.\n"
    "2. Use `df`, its columns and pandas methods (filtering, sorting, groupby, aggregations, "
    "value_counts, .str and .dt); `pd` and `np` only for functions such as pd.to_numeric or "
    "np.mean.\n"
    "3. The last line must be an expression whose value is the answer; earlier lines may only "
    "assign a name (`x = ...`).\n"
    "4. No imports, lambdas, comprehensions, loops, function definitions, f-strings, files, "
    "eval or query.\n"
    "5. Print only the code, without quotes or explanations.\n"
)
DEFAULT_PANDAS_TMPL = (
    "A pandas DataFrame called `df` holds a table. Its first rows:\n{df_str}\n\n"
    "Instructions:\n{instruction_str}\nQuery: {query_str}\n\nCode:"
)
DEFAULT_RETRY_TMPL = (
    "A pandas DataFrame called `df` holds a table. Its first rows:\n{df_str}\n\n"
    "Instructions:\n{instruction_str}\nQuery: {query_str}\n\n"
    "Your previous code was not run to an answer:\n{code}\nReason: {reason}\n"
    "Write the code again, following the instructions.\n\nCode:"
)
DEFAULT_RESPONSE_SYNTHESIS_TMPL = (
    "Answer the query from the result of the pandas code.\n"
    "Query: {query_str}\n\nPandas code:\n{pandas_instructions}\n\n"
    "Result: {pandas_output}\n\nAnswer: "
)
DEFAULT_PANDAS_PROMPT = PromptTemplate(DEFAULT_PANDAS_TMPL)
DEFAULT_RETRY_PROMPT = PromptTemplate(DEFAULT_RETRY_TMPL)
DEFAULT_RESPONSE_SYNTHESIS_PROMPT = PromptTemplate(DEFAULT_RESPONSE_SYNTHESIS_TMPL)
_FENCE_LANGUAGE = re.compile(r"^\s*(?:python|py)\s*\n")


def extract_code(llm_output: str) -> str:
    """The last fenced code block of an LLM answer, or the whole answer without quotes."""
    from llama_index.core.output_parsers.utils import parse_code_markdown

    found = parse_code_markdown(llm_output, only_last=True)
    code = found[0] if isinstance(found, list) else found
    return _FENCE_LANGUAGE.sub("", str(code)).strip()


def resolve_code_llm(explicit: LLM | None) -> LLM | None:
    """The LLM that writes code, ``None`` when there is none; core's ``MockLLM`` (what
    ``Settings.llm = None`` installs) echoes prompts and counts as none."""
    return resolve_llm(explicit)  # resolve_llm already maps MockLLM to None


def render_frame(df: Any, rows: int) -> str:
    """``str(df.head(rows))`` with bounded display options, set only for this call."""
    import pandas as pd

    with pd.option_context(
        "display.max_rows",
        rows,
        "display.max_columns",
        50,
        "display.max_colwidth",
        200,
        "display.width",
        200,
    ):
        return str(df.head(rows))


@dataclass(frozen=True)
class Attempt:
    """One program the LLM wrote: refused (``refused`` says why) or run (``result``)."""

    llm_output: str
    code: str
    refused: str | None = None
    result: SandboxResult | None = None

    @property
    def answered(self) -> bool:
        return self.result is not None and self.result.ok

    @property
    def reason(self) -> str | None:
        """Why this attempt gave no answer, ``None`` if it did."""
        if self.refused is not None:
            return f"refused: {self.refused}"
        if self.result is not None and not self.result.ok:
            return f"failed: {self.result.error}"
        return None

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"code": self.code[:MAX_TRACED_CODE_CHARS]}
        if self.refused is not None:
            record["refused"] = self.refused
        if self.result is not None:
            record["run"] = self.result.to_dict()
        return record


def traced_value(value: Any) -> dict[str, Any]:
    """The trace's ``value`` entry: the value when its JSON is at most MAX_TRACED_VALUE_CHARS
    characters, else ``None`` and ``value_omitted`` saying how large it was (the response text
    still holds it, cut to ``max_chars``)."""
    size = len(json.dumps(value, ensure_ascii=False, default=str))
    if size <= MAX_TRACED_VALUE_CHARS:
        return {"value": value}
    omitted = (
        f"the value's JSON is {size:,} characters, over the trace's bound of "
        f"{MAX_TRACED_VALUE_CHARS:,} (MAX_TRACED_VALUE_CHARS)"
    )
    return {"value": None, "value_omitted": omitted}


def write_attempt(llm_output: str) -> Attempt:
    """Extract and check the code of ``llm_output``; an :class:`Attempt` not yet run."""
    code = extract_code(llm_output)
    return Attempt(llm_output, code, refusal_reason(code))


def should_retry(attempts: list[Attempt], max_retries: int) -> bool:
    """Ask the LLM again after a refusal or an ordinary error, at most ``max_retries`` times;
    never after a limit was hit (the same program would hit it again)."""
    last = attempts[-1]
    if last.answered or len(attempts) > max_retries:
        return False
    return last.result is None or last.result.limit is None


def _predict(llm: LLM, prompt: Any, variables: dict[str, Any]) -> Call:
    """The LLM's completion of ``prompt`` with ``variables``, in both flavours."""
    return Call(lambda: llm.predict(prompt, **variables), lambda: llm.apredict(prompt, **variables))


class SafePandasQueryEngine(Configured, BaseQueryEngine):
    """Answer questions over a DataFrame with LLM-written pandas code, run deny-by-default.

    Drop-in for llama-index-experimental's ``PandasQueryEngine`` without its import chain.

    Args:
        df: the table.
        instruction_str, pandas_prompt, head, llm, synthesize_response,
            response_synthesis_prompt: as in ``PandasQueryEngine`` (prompt variables
            ``df_str``, ``query_str``, ``instruction_str``).
        output_kwargs: pandas display options for the answer, e.g. ``{"max_colwidth": 100}``.
        verbose: log the code and its output at INFO level.
        name: the table's name, in the trace.
        description: the answer when no code answered (default: the first ``head`` rows).
        retry_prompt: prompt for the retry (adds ``code`` and ``reason``).
        max_retries: LLM retries after a refusal or an error (0 to 3).
        limits: the sandbox limits (:class:`~.pandas_sandbox.SandboxLimits`).

    Raises:
        ValueError: ``head`` below 1, ``max_retries`` out of range, or ``instruction_parser``
            given (code runs only through the sandbox).

    Example:
        >>> import pandas as pd
        >>> from llama_index.core.llms import MockLLM
        >>> frame = pd.DataFrame({"city": ["Oslo", "Lima"], "staff": [4, 7]})
        >>> engine = SafePandasQueryEngine(frame, llm=MockLLM(), name="sites")  # MockLLM = no LLM
        >>> response = engine.query("Which city has the most staff?")
        >>> response.metadata["advrag_trace"]["pandas"]["outcome"]  # with a real LLM: 'answered'
        'no_llm'
    """

    head: int = Field(default=5, ge=1, description="Rows of the table shown to the LLM.")
    name: str = Field(default="table", description="The table's name, in the trace.")
    description: str | None = Field(
        default=None, description="The answer when no code answered (None: the first rows)."
    )
    instruction_str: str = Field(
        default=DEFAULT_INSTRUCTION_STR, description="The code-writing instructions."
    )
    pandas_prompt: PromptSetting = Field(
        default=DEFAULT_PANDAS_PROMPT, description="Prompt with df_str, query_str, instruction_str."
    )
    retry_prompt: PromptSetting = Field(
        default=DEFAULT_RETRY_PROMPT, description="Retry prompt (adds code and reason)."
    )
    synthesize_response: bool = Field(
        default=False, description="Ask the LLM to phrase the answer from the result."
    )
    response_synthesis_prompt: PromptSetting = Field(
        default=DEFAULT_RESPONSE_SYNTHESIS_PROMPT, description="Prompt of the phrasing step."
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES, ge=0, le=3, description="LLM retries after a refusal."
    )
    limits: SandboxLimits = Field(
        default_factory=SandboxLimits, description="The sandbox limits of every run."
    )
    verbose: bool = Field(default=False, description="Log the code and its output at INFO.")
    callback_manager: CallbackManager = Field(
        default_factory=CallbackManager, exclude=True, description="LlamaIndex callbacks."
    )

    _df: Any = PrivateAttr(default=None)
    _llm: LLM | None = PrivateAttr(default=None)

    def __init__(
        self,
        df: Any,
        instruction_str: str | None = None,
        instruction_parser: Any = None,
        pandas_prompt: BasePromptTemplate | None = None,
        output_kwargs: dict[str, Any] | None = None,
        llm: LLM | None = None,
        retry_prompt: BasePromptTemplate | None = None,
        response_synthesis_prompt: BasePromptTemplate | None = None,
        limits: SandboxLimits | None = None,
        callback_manager: CallbackManager | None = None,
        **settings: Any,
    ) -> None:
        if instruction_parser is not None:
            raise ValueError(
                "instruction_parser is not supported: SafePandasQueryEngine runs code only "
                "through its allowlist and sandbox"
            )
        given = {
            "instruction_str": instruction_str,
            "pandas_prompt": pandas_prompt,
            "retry_prompt": retry_prompt,
            "response_synthesis_prompt": response_synthesis_prompt,
            "limits": limits,
        }
        settings.update({key: value for key, value in given.items() if value is not None})
        if output_kwargs:
            base = SandboxLimits.model_validate(settings.get("limits") or SandboxLimits())
            display = {**base.display, **{f"display.{k}": v for k, v in output_kwargs.items()}}
            settings["limits"] = SandboxLimits(**{**base.model_dump(), "display": display})
        settings["callback_manager"] = callback_manager or CallbackManager([])
        super().__init__(**settings)
        self._df = df
        self._llm = llm
        if self.description is None:
            self.description = render_frame(df, self.head)

    @classmethod
    def class_name(cls) -> str:
        return "SafePandasQueryEngine"

    # --- prompts -------------------------------------------------------------------------------

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _get_prompts(self) -> dict[str, Any]:
        return {
            "pandas_prompt": self.pandas_prompt,
            "retry_prompt": self.retry_prompt,
            "response_synthesis_prompt": self.response_synthesis_prompt,
        }

    def _update_prompts(self, prompts: dict[str, Any]) -> None:
        if "pandas_prompt" in prompts:
            self.pandas_prompt = prompts["pandas_prompt"]
        if "retry_prompt" in prompts:
            self.retry_prompt = prompts["retry_prompt"]
        if "response_synthesis_prompt" in prompts:
            self.response_synthesis_prompt = prompts["response_synthesis_prompt"]

    # --- pure logic shared by sync and async ---------------------------------------------------

    def _next_prompt(
        self, query: str, attempts: list[Attempt]
    ) -> tuple[BasePromptTemplate, dict[str, str]] | None:
        """The next code-writing prompt and its variables, ``None`` when done."""
        variables = {
            "df_str": render_frame(self._df, self.head),
            "query_str": query,
            "instruction_str": self.instruction_str,
        }
        if not attempts:
            return self.pandas_prompt, variables
        if not should_retry(attempts, self.max_retries):
            return None
        last = attempts[-1]
        return self.retry_prompt, {**variables, "code": last.code, "reason": last.reason or ""}

    def _log(self, attempt: Attempt) -> None:
        if attempt.refused is not None:
            logger.warning(
                "table %r: refused generated pandas code (%s): %r",
                self.name,
                attempt.refused,
                attempt.code[:200],
            )
        elif attempt.result is not None and not attempt.result.ok:
            logger.info("table %r: generated pandas code failed: %s", self.name, attempt.reason)
        if self.verbose:
            text = attempt.result.text[:500] if attempt.result else None
            logger.info("table %r: code %r -> %r", self.name, attempt.code, text)

    def _fallback(self, why: str, record: dict[str, Any], llm_output: str = "") -> Response:
        text = f"No answer was computed from table {self.name!r} ({why}).\n{self.description}"
        record = {**record, "reason": why}
        dispatcher.event(PandasQueryEvent(record=record))
        metadata = {
            "pandas_instruction_str": llm_output,
            "raw_pandas_output": "",
            TRACE_KEY: {TRACE_COMPONENT: record},
        }
        return Response(response=text, metadata=metadata)

    def _no_llm(self) -> Response:
        logger.info(
            "table %r: no LLM to write pandas code; answering with its description", self.name
        )
        record = {"table": self.name, "outcome": "no_llm", "attempts": []}
        return self._fallback("no LLM to write pandas code", record)

    def _respond(self, attempts: list[Attempt], synthesized: str | None = None) -> Response:
        last = attempts[-1]
        record: dict[str, Any] = {
            "table": self.name,
            "attempts": [attempt.to_dict() for attempt in attempts],
        }
        if last.answered and last.result is not None:
            record.update(outcome="answered", **traced_value(last.result.value))
            dispatcher.event(PandasQueryEvent(record=record))
            metadata = {
                "pandas_instruction_str": last.llm_output,
                "raw_pandas_output": last.result.text,
                TRACE_KEY: {TRACE_COMPONENT: record},
            }
            text = synthesized if synthesized is not None else last.result.text
            return Response(response=text, metadata=metadata)
        record["outcome"] = "refused" if last.refused is not None else "failed"
        why = (
            "the generated code was refused"
            if last.refused is not None
            else "the generated code failed"
        )
        return self._fallback(why, record, last.llm_output)

    def _synthesis_variables(
        self, query_bundle: QueryBundle, attempts: list[Attempt]
    ) -> dict[str, str]:
        last = attempts[-1]
        output = last.result.text if last.result is not None else ""
        return {
            "query_str": query_bundle.query_str,
            "pandas_instructions": last.code,
            "pandas_output": output,
        }

    # --- the plan: written once, its I/O (the LLM, the sandbox) named in both flavours ---------

    def _run_code(self, code: str) -> Call:
        df, limits = self._df, self.limits
        return Call(
            lambda: run_pandas_code(code, df, limits),
            lambda: arun_pandas_code(code, df, limits),
        )

    def _answering(self, query_bundle: QueryBundle) -> Generator[Call, Any, Response]:
        """Ask the LLM for code, run it in the sandbox, retry after a refusal or an error, and
        phrase the answer when asked to."""
        query_bundle = clean_query_bundle(query_bundle, type(self).__name__)
        llm = resolve_code_llm(self._llm)
        if llm is None:
            return self._no_llm()
        attempts: list[Attempt] = []
        while (step := self._next_prompt(query_bundle.query_str, attempts)) is not None:
            attempt = write_attempt((yield _predict(llm, *step)))
            if attempt.refused is None:
                attempt = replace(attempt, result=(yield self._run_code(attempt.code)))
            self._log(attempt)
            attempts.append(attempt)
        synthesized = None
        if self.synthesize_response and attempts[-1].answered:
            variables = self._synthesis_variables(query_bundle, attempts)
            synthesized = yield _predict(llm, self.response_synthesis_prompt, variables)
        return self._respond(attempts, synthesized)

    def _query(self, query_bundle: QueryBundle) -> Response:
        return drive(self._answering(query_bundle), run_call)

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        return await adrive(self._answering(query_bundle), arun_call)


__all__ = [
    "DEFAULT_INSTRUCTION_STR",
    "DEFAULT_PANDAS_PROMPT",
    "DEFAULT_RESPONSE_SYNTHESIS_PROMPT",
    "DEFAULT_RETRY_PROMPT",
    "Attempt",
    "SafePandasQueryEngine",
    "extract_code",
    "render_frame",
    "resolve_code_llm",
    "should_retry",
    "traced_value",
    "write_attempt",
]
