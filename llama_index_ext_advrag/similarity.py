"""Cosine similarities of embedding vectors (numpy), shared by the parsers and postprocessors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def normalise_rows(vectors: ArrayLike) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero).

    Example:
        >>> normalise_rows([[3.0, 4.0], [0.0, 0.0]]).tolist()
        [[0.6, 0.8], [0.0, 0.0]]
    """
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def cosine_to_query(
    query: Sequence[float], vectors: Sequence[Sequence[float]] | np.ndarray
) -> list[float]:
    """Cosine similarity of each row of ``vectors`` to ``query`` (0.0 for a zero row).

    Example:
        >>> cosine_to_query([2.0, 0.0], [[1.0, 0.0], [0.0, 3.0]])
        [1.0, 0.0]
    """
    if len(vectors) == 0:
        return []
    return (normalise_rows(vectors) @ normalise_rows(query)[0]).tolist()


def paired_cosines(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``left`` with the same row of ``right`` (0.0 where one is zero).

    Example:
        >>> paired_cosines(np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [1.0, 0.0]
    """
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    return np.einsum("ij,ij->i", left, right) / np.where(norms == 0, 1.0, norms)


__all__ = ["cosine_to_query", "normalise_rows", "paired_cosines"]
