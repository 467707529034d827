"""Progress bars that model libraries draw by themselves, off for a block when asked.

transformers draws a "Loading weights" bar whenever a model is loaded (sentence-transformers'
all-MiniLM-L6-v2 included), whatever the caller's own ``show_progress``; the ``advrag``
commands' ``--quiet`` turns it off around model loading and restores the previous setting.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator


@contextlib.contextmanager
def library_progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, transformers' (and through it huggingface_hub's) progress bars are
    off unless ``enabled``; afterwards they are as they were. Without transformers installed
    this does nothing."""
    if enabled or importlib.util.find_spec("transformers") is None:
        yield
        return
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


__all__ = ["library_progress_bars"]
