"""Landlock (Linux >= 5.13): the kernel's write barrier of the pandas sandbox child.

Applied by the child (:mod:`._pandas_child`) to itself just before the program runs, after
``prctl(PR_SET_NO_NEW_PRIVS)``; the restriction cannot be lifted and holds for any code, Python
or C (pyarrow, numpy, ctypes), that runs in the child afterwards:

* files and folders may be created, written, truncated, renamed or removed only beneath the
  child's working directory;
* files may be read (and libraries loaded) only beneath that directory and the read roots the
  caller names (the Python installation, the system's shared libraries, time-zone data);
* with ABI >= 4 no TCP port may be bound or connected to; with ABI >= 6 no signal may be sent and
  no abstract UNIX socket reached outside the child.

Files opened before the call (stdin, stdout, stderr) stay usable. Only the standard library is
imported: the child loads this file by path (``python -I`` does not put its folder on
``sys.path``) and the parent imports it to learn the kernel's ABI.
"""

from __future__ import annotations

import ctypes
import os
import platform

# x86_64 and aarch64 share these numbers (the generic syscall table, Linux 5.13)
SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READS = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a file rule may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    """The kernel refused a Landlock call (the message names the call and errno)."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (another OS or architecture,
    a kernel without it, or Landlock disabled at boot)."""
    numbers = SYSCALLS.get(platform.machine())
    if not numbers or platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(numbers[0], None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def fs_rights(abi: int) -> int:
    """Every filesystem right the kernel of ``abi`` knows (all of them are handled: denied
    unless a rule allows them)."""
    rights = (MAKE_SYM << 1) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _check(result: int, call: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise LandlockError(number, f"{call} failed: {os.strerror(number)}")
    return result


def restrict_self(workdir: str, read_roots: tuple[str, ...]) -> int:
    """Apply the barrier of the module docstring to this process (and any child it would
    have): returns the ABI applied, 0 where the kernel has no Landlock (nothing applied).

    Raises:
        LandlockError: the kernel has Landlock but refused a call (the caller must not run the
            program then).
    """
    abi = abi_version()
    if abi <= 0:
        return 0
    create, add_rule, restrict = SYSCALLS[platform.machine()]
    libc = _libc()
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP  # no rule: none allowed
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = ctypes.sizeof(attr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _check(libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), 0), "create")
    try:
        rules = [(os.path.realpath(workdir), handled)]
        rules += [(root, READS) for root in read_roots]
        for path, allowed in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a read root this system does not have
            try:
                if not os.path.isdir(path):
                    allowed &= FILE_RIGHTS
                beneath = _PathBeneathAttr(allowed_access=allowed & handled, parent_fd=fd)
                _check(
                    libc.syscall(add_rule, ruleset, RULE_PATH_BENEATH, ctypes.byref(beneath), 0),
                    f"add_rule({path!r})",
                )
            finally:
                os.close(fd)
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(restrict, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return abi


__all__ = ["LandlockError", "abi_version", "fs_rights", "restrict_self"]
