"""Why Milvus Lite could not open a file, in words a user can act on.

pymilvus reports every failure to start the Milvus Lite server of a ``*.db`` path as
``ConnectionConfigException: Open local milvus failed``, without the path or the cause (the
cause is only logged by milvus-lite). :func:`diagnose_lite_path` finds the usual causes again:
a folder that cannot be written, a path that is a file of another format, another process
holding the data folder's lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)

LITE_LOCK_FILENAME = "LOCK"  # milvus_lite.db.LOCK_FILENAME
_OPEN_FAILED = "open local milvus failed"


def is_lite_open_failure(error: BaseException) -> bool:
    """Whether ``error`` is pymilvus' "Open local milvus failed" (Milvus Lite did not start)."""
    return _OPEN_FAILED in str(error).lower()


def _lock_holder(lock_path: Path) -> str | None:
    """A description of the lock on ``lock_path`` when another open file holds it."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock probe
        return None
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return f"another process holds its lock ({lock_path})"
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _write_problem(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (created if missing), or ``None``."""
    for ancestor in (folder, *folder.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return f"its folder cannot be written ({ancestor} is a file, not a folder)"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".advrag-write-probe-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        return f"its folder cannot be written ({reason}: {error.filename or folder})"
    return None


def diagnose_lite_path(path: str | os.PathLike[str]) -> str:
    """The likely reason Milvus Lite cannot open ``path`` (a ``*.db`` data folder).

    Example:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> diagnose_lite_path(os.path.join(folder, "free.db")).startswith("no cause found")
        True
    """
    target = Path(path).expanduser().absolute()
    if target.is_file():
        return (
            f"{target} is a file, but Milvus Lite {_lite_version()} keeps a database in a "
            "folder of that name (a file from another Milvus Lite version, or not a database)"
        )
    if target.is_dir():
        holder = _lock_holder(target / LITE_LOCK_FILENAME)
        if holder is not None:
            return holder + "; close the other process or open another file"
    problem = _write_problem(target if target.is_dir() else target.parent)
    if problem is not None:
        return problem
    return "no cause found (see the milvus_lite log lines above for its error)"


def _lite_version() -> str:
    with contextlib.suppress(Exception):
        from milvus_lite import __version__

        return str(__version__)
    return "(unknown version)"


__all__ = ["LITE_LOCK_FILENAME", "diagnose_lite_path", "is_lite_open_failure"]
