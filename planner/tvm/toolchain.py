"""Toolchains: Python environments that each hold one apache-tvm, for compiling under it.

A toolchain is named by its *spec*:

- ``""``: the environment this process runs in (the worker's own TVM), the default;
- ``apache-tvm==0.26.0``: that release from PyPI (only exact pins: a range would change what a
  cached toolchain holds as releases appear);
- a path to an ``apache_tvm-*.whl`` file;
- a path to a TVM source folder whose build is done (``python/tvm`` and its libraries), a
  user's fork for instance.

:func:`ensure` creates a toolchain on first use and caches it under a root folder, keyed by
its spec: a virtual environment made with ``venv --system-site-packages``, in which pip
installs only ``apache-tvm`` (and the ``apache-tvm-ffi`` its wheel was built against).
Everything else (numpy, torch, onnx) is the creating environment's, seen through a ``.pth``
file, so nothing large is ever downloaded and every toolchain imports the same model code.
A small probe (``python -m planner.tvm.compat``) then runs in the new environment: a release
that lacks what the TVM wing needs is refused with a message naming what is missing, and
the refusal is cached too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Bumped when a toolchain folder's layout changes, so old ones are not reused.
LAYOUT = 1
#: The ``apache-tvm-ffi`` each release line's wheels link against. pip would otherwise keep
#: whatever FFI the creating environment has (0.25 does not load with 0.1.13 or later) or
#: pick the newest (0.1.15.x, with which ``tvm.ir.save_json`` segfaults under 0.27).
FFI_PINS = {"0.25": "0.1.12", "0.26": "0.1.14.post1", "0.27": "0.1.14.post1"}
#: Seconds pip and the probe may take (a 100 MB wheel over a slow link included).
INSTALL_SECONDS = 1800
PROBE_SECONDS = 300

_RELEASE = re.compile(r"^apache[-_.]tvm\s*==\s*([0-9][0-9A-Za-z.+!-]*)$", re.IGNORECASE)
_WHEEL = re.compile(r"^apache_tvm-([0-9][^-]*)-.*\.whl$", re.IGNORECASE)

Progress = Callable[[str], None]


class ToolchainError(RuntimeError):
    """A spec that names no toolchain, or a toolchain that cannot be made or cannot work."""


@dataclass(frozen=True)
class Spec:
    text: str
    kind: str  # "worker", "release", "wheel" or "source"
    #: The release a ``release`` or ``wheel`` spec installs; empty for the others.
    version: str = ""
    path: Path | None = None

    @property
    def ffi_pin(self) -> str:
        line = ".".join(self.version.split(".")[:2])
        pin = FFI_PINS.get(line)
        return f"apache-tvm-ffi=={pin}" if pin else ""


@dataclass(frozen=True)
class Toolchain:
    spec: str
    #: The interpreter to run compiles with.
    python: str
    tvm_version: str
    tvm_git_hash: str = ""
    #: Folders the interpreter reads beyond the creating environment's (a sandbox shows
    #: them read-only): the virtual environment, and a source folder.
    folders: tuple[str, ...] = field(default_factory=tuple)

    @property
    def identity(self) -> str:
        """What distinguishes this TVM from another: part of the compile-cache key."""
        return json.dumps([self.spec, self.tvm_version, self.tvm_git_hash])

    def to_json(self) -> dict:
        return {**asdict(self), "folders": list(self.folders)}

    @classmethod
    def from_json(cls, data: dict) -> Toolchain:
        return cls(
            spec=data["spec"],
            python=data["python"],
            tvm_version=data["tvm_version"],
            tvm_git_hash=data.get("tvm_git_hash", ""),
            folders=tuple(data.get("folders", ())),
        )


def parse_spec(text: str) -> Spec:
    """The toolchain ``text`` names; ToolchainError, saying what is accepted, otherwise."""
    if not isinstance(text, str):
        raise ToolchainError(f"toolchain {text!r}: expected a string")
    text = text.strip()
    if not text:
        return Spec("", "worker")
    release = _RELEASE.match(text)
    if release:
        return Spec(f"apache-tvm=={release.group(1)}", "release", release.group(1))
    if text.endswith(".whl"):
        path = Path(text).expanduser()
        wheel = _WHEEL.match(path.name)
        if wheel is None:
            raise ToolchainError(
                f"toolchain {text!r}: a wheel must be an apache-tvm wheel "
                "(apache_tvm-VERSION-...whl)"
            )
        return Spec(text, "wheel", wheel.group(1), path)
    if "/" in text or text.startswith((".", "~")):
        return Spec(text, "source", "", Path(text).expanduser())
    raise ToolchainError(
        f"toolchain {text!r}: expected apache-tvm==VERSION (an exact release from PyPI), "
        "a path to an apache_tvm-*.whl file, or a path to a built TVM source folder"
    )


def worker_toolchain() -> Toolchain:
    """The environment this process runs in, as a toolchain (imports TVM)."""
    from planner.tvm import compat

    return Toolchain("", sys.executable, compat.version(), compat.git_hash())


def ensure(
    text: str,
    root: Path,
    progress: Progress | None = None,
    *,
    allowed_paths: list[Path] | None = None,
) -> Toolchain:
    """The toolchain ``text`` names, created under ``root`` unless it is there already.

    ``progress`` receives one line per step (for a run's log). ``allowed_paths``, when
    given, are the only folders a wheel or source spec may name (a worker runs the specs a
    tracked repository's manifest lists; the command line passes None: anything). Raises
    ToolchainError when the spec is bad, pip fails, or the TVM it holds cannot work.
    """
    say = progress or log.info
    spec = parse_spec(text)
    if spec.kind == "worker":
        return worker_toolchain()
    if spec.path is not None:
        _check_path(spec, allowed_paths)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / _folder_name(spec)
    with _locked(folder.with_name(folder.name + ".lock"), spec, say):
        refused = folder / "refused.txt"
        if refused.exists():
            raise ToolchainError(refused.read_text())
        ready = folder / "toolchain.json"
        if ready.exists() and spec.kind != "source":
            toolchain = Toolchain.from_json(json.loads(ready.read_text()))
            if Path(toolchain.python).exists():
                return toolchain
        return _create(spec, folder, say)


def _check_path(spec: Spec, allowed_paths: list[Path] | None) -> None:
    path = spec.path.resolve()
    if allowed_paths is not None and not any(
        path == Path(a).resolve() or path.is_relative_to(Path(a).resolve()) for a in allowed_paths
    ):
        where = ", ".join(str(a) for a in allowed_paths) or "none are configured"
        raise ToolchainError(
            f"toolchain {spec.text!r}: local wheels and source folders must lie in the "
            f"worker's PEAKWATCH_TOOLCHAIN_PATHS ({where})"
        )
    if spec.kind == "wheel" and not path.is_file():
        raise ToolchainError(f"toolchain {spec.text!r}: no such wheel file")
    if spec.kind == "source" and not (path / "python" / "tvm" / "__init__.py").is_file():
        raise ToolchainError(
            f"toolchain {spec.text!r}: not a TVM source folder (no python/tvm/__init__.py)"
        )


def _folder_name(spec: Spec) -> str:
    identity = [LAYOUT, spec.kind, spec.text, sys.executable, sys.version]
    if spec.kind == "wheel":
        identity.append(_file_digest(spec.path))
    if spec.kind == "source":
        identity.append(str(spec.path.resolve()))
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9.]+", "-", spec.version or spec.path.name).strip("-")
    return f"{spec.kind}-{readable or 'tvm'}-{digest}"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path, spec: Spec, say: Progress) -> Iterator[None]:
    """One creator per toolchain: another worker (or run) waits, then finds it made."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"toolchain {spec.text}: waiting for another worker that is creating it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _create(spec: Spec, folder: Path, say: Progress) -> Toolchain:
    started = time.monotonic()
    if folder.exists():
        # A creation that died half-way (its worker was killed) left no marker: start over.
        shutil.rmtree(folder)
    say(f"toolchain {spec.text}: creating a virtual environment")
    venv = folder / "venv"
    _run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        spec,
        "venv",
        say,
    )
    python = venv / "bin" / "python"
    site_packages = Path(_venv_purelib(python, spec, say))
    # Named so they are read in this order: a source folder's tvm, then this environment's
    # packages (numpy, torch, pip), after the toolchain's own site-packages.
    if spec.kind == "source":
        (site_packages / "_peakwatch_0_source.pth").write_text(
            str(spec.path.resolve() / "python") + "\n"
        )
    (site_packages / "_peakwatch_1_worker.pth").write_text(
        "\n".join(environment_site_packages()) + "\n"
    )
    if spec.kind != "source":
        requirement = spec.text if spec.kind == "release" else str(spec.path.resolve())
        pins = [requirement, *([spec.ffi_pin] if spec.ffi_pin else [])]
        say(f"toolchain {spec.text}: installing {' '.join(pins)} with pip")
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "--only-binary",
                ":all:",
                *pins,
            ],
            spec,
            "pip",
            say,
            timeout=INSTALL_SECONDS,
            echo=_pip_progress,
        )
    say(f"toolchain {spec.text}: checking what its TVM provides")
    found = probe(str(python), spec)
    folders = [str(folder)]
    if spec.kind == "source":
        folders.append(str(spec.path.resolve()))
    if found["missing"]:
        message = (
            f"toolchain {spec.text} (TVM {found['tvm_version']}) cannot run Peakwatch's TVM "
            f"wing; it lacks: {'; '.join(found['missing'])}"
        )
        _refuse(folder, message)
    toolchain = Toolchain(
        spec.text, str(python), found["tvm_version"], found["tvm_git_hash"], tuple(folders)
    )
    (folder / "toolchain.json").write_text(json.dumps(toolchain.to_json(), indent=2))
    say(
        f"toolchain {spec.text}: ready in {time.monotonic() - started:.0f} s, TVM "
        f"{toolchain.tvm_version} (git {toolchain.tvm_git_hash or 'unknown'})"
    )
    return toolchain


def _refuse(folder: Path, message: str) -> None:
    """Remember a refusal (the next run is told at once) and drop the environment."""
    shutil.rmtree(folder / "venv", ignore_errors=True)
    (folder / "refused.txt").write_text(message)
    raise ToolchainError(message)


def probe(python: str, spec: Spec | None = None) -> dict:
    """What the TVM of interpreter ``python`` is and lacks (``python -m planner.tvm.compat``)."""
    label = spec.text if spec else python
    env = {**_clean_environment(), "PYTHONPATH": str(PROJECT_ROOT)}
    with tempfile.TemporaryDirectory(prefix="peakwatch-probe-") as scratch:
        try:
            done = subprocess.run(
                [python, "-m", "planner.tvm.compat"],
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=PROBE_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ToolchainError(
                f"toolchain {label}: importing its TVM took over {PROBE_SECONDS} s"
            ) from None
    if done.returncode != 0:
        raise ToolchainError(f"toolchain {label}: its TVM does not load: {_last_error(done)}")
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolchainError(
            f"toolchain {label}: the probe printed no report: {done.stdout[-500:]}"
        ) from None


def _last_error(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit status {done.returncode}"


def _pip_progress(line: str) -> bool:
    return line.startswith(("Collecting", "Downloading", "Installing", "Successfully", "ERROR"))


def _run(
    command: list[str],
    spec: Spec,
    what: str,
    say: Progress,
    *,
    timeout: float = 300,
    echo: Callable[[str], bool] | None = None,
) -> None:
    lines: list[str] = []
    env = _clean_environment()
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )
    except OSError as exc:
        raise ToolchainError(f"toolchain {spec.text}: cannot start {what}: {exc}") from None
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        lines.append(line)
        if echo is not None and echo(line.strip()):
            say(f"toolchain {spec.text}: {what}: {line.strip()}")
        if time.monotonic() > deadline:
            proc.kill()
            break
    code = proc.wait()
    if code != 0:
        tail = "\n".join(lines[-15:])
        raise ToolchainError(f"toolchain {spec.text}: {what} failed (exit {code}):\n{tail}")


def _venv_purelib(python: Path, spec: Spec, say: Progress) -> str:
    done = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=False,
        env=_clean_environment(),
    )
    if done.returncode != 0:
        raise ToolchainError(f"toolchain {spec.text}: the new environment does not start")
    path = done.stdout.strip()
    Path(path).mkdir(parents=True, exist_ok=True)
    return path


def environment_site_packages() -> list[str]:
    """This environment's package folders: a toolchain sees them after its own TVM."""
    folders = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    folders += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [f for f in dict.fromkeys(folders) if f and Path(f).is_dir()]


def _clean_environment() -> dict[str, str]:
    """What pip and the probe need of the environment, and nothing that would pick a TVM
    other than the toolchain's (PYTHONPATH, a virtual environment's variables)."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "PIP_CONFIG_FILE",
        "PIP_CACHE_DIR",
        "PIP_NO_INDEX",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
    )
    return {k: os.environ[k] for k in keep if k in os.environ}


def default_root() -> Path:
    """Where the command line keeps toolchains: ``PEAKWATCH_TOOLCHAIN_DIR``, or the user's
    cache folder."""
    configured = os.environ.get("PEAKWATCH_TOOLCHAIN_DIR")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "peakwatch" / "toolchains"
