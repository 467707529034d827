"""Build this checkout's wheel and fresh virtual environments for it, without network.

Shared by the wheel quickstart test and the base-install test. Code run in such an environment
goes through :func:`run_python`, whose child may reach loopback only (the test session's autouse
guard does not reach a child process).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import venv
import zipfile
from importlib.metadata import Distribution
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# Blocks every socket that leaves the machine in the child, as the unit tier's guard does.
NETWORK_GUARD = """
import ipaddress, socket
_connect = socket.socket.connect
def _guarded(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        host = str(address[0])
        if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
            raise OSError(f"network access blocked in a fresh-environment test: {address!r}")
    return _connect(sock, address)
socket.socket.connect = _guarded
"""


def build_wheel(outdir: Path) -> Path:
    """This checkout's wheel, built without network (``--no-isolation``: needs build, hatchling)."""
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(outdir)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = outdir.glob("llama_index_ext_advrag-*.whl")
    return wheel


def create_environment(folder: Path) -> tuple[Path, Path]:
    """A fresh virtual environment with pip: its python and its site-packages folder."""
    venv.EnvBuilder(with_pip=True).create(folder)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    return python, Path(site_packages)


def offline_pip_env() -> dict[str, str]:
    """The environment for a pip that sees no index, no configured find-links, no constraints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def run_python(
    python: str | Path,
    code: str,
    cwd: Path,
    pythonpath: str | None = None,
    timeout: float = 900,
) -> str:
    """Run ``code`` with ``python`` (loopback only, no OPENAI_API_KEY); its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "PYTHONPATH")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    completed = subprocess.run(
        [str(python), "-c", NETWORK_GUARD + code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


# --- wheels of installed distributions --------------------------------------------------------

# Written by the installer, not part of a wheel.
_INSTALL_RECORDS = {"INSTALLER", "RECORD", "REQUESTED", "direct_url.json"}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def _compressed_tag(tags: list[str]) -> str:
    """One file-name tag for a wheel's tags (``py2-none-any`` + ``py3-none-any`` ->
    ``py2.py3-none-any``, PEP 425's compressed tag set)."""
    if not tags:
        return "py3-none-any"
    parts = [tag.split("-") for tag in tags]
    return "-".join(".".join(dict.fromkeys(part[i] for part in parts)) for i in range(3))


def wheel_from_installed(dist: Distribution, outdir: Path) -> Path:
    """A wheel of the installed distribution ``dist`` (its files under site-packages, its
    metadata and its first wheel tag), so that pip can install it with ``--no-index``.

    Files outside site-packages (console scripts, which pip writes again from the entry points;
    data files) and byte code are left out.
    """
    files = [f for f in dist.files or () if ".." not in f.parts and f.suffix != ".pyc"]
    info = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
    if info is None:
        raise ValueError(f"{dist.metadata['Name']} has no .dist-info among its recorded files")
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]  # fmt: skip
    name = dist.metadata["Name"].replace("-", "_").replace(".", "_")
    wheel = outdir / f"{name}-{dist.version}-{_compressed_tag(tags)}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for file in files:
            if file.parts[0] == info and file.name in _INSTALL_RECORDS:
                continue
            path = Path(str(dist.locate_file(file)))
            if not path.is_file():
                continue
            data = path.read_bytes()
            archive.writestr(file.as_posix(), data)
            record.append(f"{file.as_posix()},{_record_hash(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel
