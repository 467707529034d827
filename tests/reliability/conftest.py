"""The reliability suite prints its outcome counts (see ``reliability_outcomes``)."""

from reliability_outcomes import pytest_terminal_summary

__all__ = ["pytest_terminal_summary"]
