"""A minimal OpenAI-compatible chat server on llama-cpp-python, for the answer benchmark.

Why not ``python -m llama_cpp.server``: its log-probabilities need ``logits_all=True``, and with
it every evaluated prompt token's logits (151,936 floats for Qwen2.5) are computed and copied.
Measured on the 2-core machine under load (1 thread, ~750-token prompts): wall time exceeded
llama.cpp's own prompt-eval time by 85-100 s per generation with ``logits_all``, by ~3 s
without. This server keeps ``logits_all=False`` and answers a request that asks for
``logprobs`` with one output token (the support judge's yes/no) from the last prompt token's
logits, which llama.cpp computes anyway. Everything else is llama-cpp-python's: the GGUF's chat
template (``Jinja2ChatFormatter``, as the library's own chat handler renders it), greedy
generation with ``create_completion``, and the prefix reuse of ``Llama.generate`` (the longest
common prefix with the previous prompt stays in the KV cache; the judge path does the same).

Each response carries ``usage.prompt_tokens_evaluated``: the prompt tokens actually evaluated
(the rest was reused), also logged per request.

Usage::

    nice -n 10 python benchmarks/llm_server.py --model MODEL.gguf --port 8741 --threads 1
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import numpy as np

logger = logging.getLogger("llm_server")


class Engine:
    """One ``Llama`` and its chat formatter; requests are served one at a time."""

    def __init__(self, model: str, threads: int, n_ctx: int, alias: str) -> None:
        from llama_cpp import Llama, llama_chat_format

        self.llm = Llama(model_path=model, n_threads=threads, n_threads_batch=threads,
                         n_ctx=n_ctx, logits_all=False, verbose=False)  # fmt: skip
        self.alias = alias
        template = self.llm.metadata["tokenizer.chat_template"]
        eos = self.llm.token_eos()
        self.formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=self.llm._model.token_get_text(eos),
            bos_token=self.llm._model.token_get_text(self.llm.token_bos()),
            stop_token_ids=[eos],
        )
        self.evaluated_total = 0
        self.seconds_total = 0.0

    def _tokens(self, messages: list[dict[str, Any]]) -> tuple[list[int], Any]:
        result = self.formatter(messages=messages)
        tokens = self.llm.tokenize(result.prompt.encode("utf-8"),
                                   add_bos=not result.added_special, special=True)  # fmt: skip
        return tokens, result.stop

    def _reused(self, tokens: list[int]) -> int:
        prefix = 0
        for a, b in zip(self.llm._input_ids.tolist(), tokens, strict=False):
            if a != b:
                break
            prefix += 1
        return min(prefix, self.llm.n_tokens)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        tokens, stop = self._tokens(body["messages"])
        max_tokens = int(body.get("max_tokens") or 256)
        reused = self._reused(tokens)
        if body.get("logprobs") and max_tokens == 1:
            content, finish, logprobs = self._first_token(
                tokens, int(body.get("top_logprobs") or 5)
            )
            completion_tokens = 1
        else:
            stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
            out = self.llm.create_completion(
                tokens, max_tokens=max_tokens, temperature=0.0, top_k=1, stop=stops or None
            )
            choice = out["choices"][0]
            content, finish, logprobs = choice["text"], choice["finish_reason"], None
            completion_tokens = out["usage"]["completion_tokens"]
        evaluated = len(tokens) - min(reused, len(tokens) - 1)
        seconds = time.perf_counter() - started
        self.evaluated_total += evaluated
        self.seconds_total += seconds
        logger.info("prompt %d tokens, evaluated %d, completion %d, %.1f s (total %.0f s)",
                    len(tokens), evaluated, completion_tokens, seconds, self.seconds_total)  # fmt: skip
        return {
            "id": f"chatcmpl-{int(time.time() * 1000)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.alias,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                    "logprobs": logprobs,
                }
            ],  # fmt: skip
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": completion_tokens,
                "total_tokens": len(tokens) + completion_tokens,
                "prompt_tokens_evaluated": evaluated,
                "seconds": round(seconds, 3),
            },  # fmt: skip
        }

    def _first_token(self, tokens: list[int], top: int) -> tuple[str, str, dict[str, Any]]:
        """Evaluate the prompt (reusing the cached prefix, as ``Llama.generate`` does) and
        return the greedy first token with the top alternatives' log-probabilities."""
        llm = self.llm
        reuse = self._reused(tokens)
        if reuse >= len(tokens):  # nothing left to decode: replay the last token for logits
            reuse = len(tokens) - 1
        if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.n_tokens = reuse
        else:
            llm.reset()
            reuse = 0
        llm.eval(tokens[reuse:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(
            np.float64
        )
        shifted = logits - logits.max()
        logprobs = shifted - math.log(np.exp(shifted).sum())
        order = np.argsort(-logprobs)[:top]
        alternatives = [{"token": llm.detokenize([int(i)]).decode("utf-8", errors="replace"),
                         "logprob": float(logprobs[i]), "bytes": None} for i in order]  # fmt: skip
        first = alternatives[0]
        return (
            first["token"],
            "length",
            {
                "content": [{**first, "top_logprobs": alternatives}],
                "refusal": None,
            },
        )


def make_handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": engine.alias,
                                                             "object": "model"}]})  # fmt: skip
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length))
                self._send(200, engine.chat(body))
            except Exception as exc:  # a bad request is an error response, the server lives on
                logger.exception("request failed")
                self._send(500, {"error": {"message": repr(exc)[:500],
                                           "type": "internal_server_error"}})  # fmt: skip

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8741)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = Engine(args.model, args.threads, args.n_ctx, args.alias)
    server = HTTPServer((args.host, args.port), make_handler(engine))
    logger.info("serving %s on %s:%d", args.alias, args.host, args.port)
    server.serve_forever()


if __name__ == "__main__":
    main()
