"""A read-only view of a checkout, served by the worker, that records what a job looked at.

The compile cache reuses a model's figures while nothing its import read changed
(:mod:`workers.compile_cache`). What it read must be seen from outside the job: code in the
job's own process can read a file from native code, through a program it starts or a child
it spawns, or rewrite any record it keeps. So the import sees its checkout through FUSE, as
a file system this process serves: the kernel asks it for every name any process of the job
looks up (found or not), every folder it lists and every file it opens, whatever made the
request, and this process, outside the sandbox, writes down each. Nothing the job does can
narrow that record; a job that cannot see the view (it is gone) fails, and a record that is
not written leaves the Result keyed by the whole tree.

Run as ``python -m workers.sandbox.view ROOT MOUNTPOINT RECORD``: it serves ROOT read-only at
MOUNTPOINT until it is unmounted (:class:`CheckoutView`), then writes the record as
:mod:`planner.checkout_reads` reads it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from planner.checkout_reads import MAX_PATHS, MAX_RECORD_BYTES, ROOT

#: How long a view may take to appear, and to go away and write its record (a loaded host
#: may take its time over the job's last processes, which hold the view until they end).
START_SECONDS = 30.0
STOP_SECONDS = 60.0
_MNT_DETACH = 2


def unavailable() -> str:
    """Why this host cannot serve a view (no FUSE, no libfuse, no right to mount); empty
    when it can. Tried once per process, by mounting one."""
    return _probe()


@functools.cache
def _probe() -> str:
    if not os.path.exists("/dev/fuse"):
        return "the kernel offers no FUSE (/dev/fuse is missing)"
    try:
        import fuse  # noqa: F401  (fusepy, over the host's libfuse2)
    except (ImportError, OSError) as exc:
        return f"fusepy and libfuse2 are needed for it: {exc}"
    if os.geteuid() != 0 and shutil.which("fusermount") is None:
        return "the worker is not root and there is no fusermount to mount it"
    with tempfile.TemporaryDirectory(prefix="peakwatch-view-probe-") as scratch:
        root, mount = Path(scratch, "root"), Path(scratch, "mount")
        root.mkdir()
        (root / "probe").write_text("ok")
        try:
            with CheckoutView(root, mount) as view:
                seen = (mount / "probe").read_text()
            if seen != "ok" or "probe" not in view.record()["files"]:
                return "a FUSE view of a folder did not show or record its files"
        except (OSError, ViewError) as exc:
            return f"a FUSE view could not be mounted here: {exc}"
    return ""


class ViewError(RuntimeError):
    pass


class CheckoutView:
    """``root`` served read-only at ``mountpoint`` by a process of its own while in use.

    ``record()`` is what the view saw, once it is unmounted: every path looked up or opened
    (``files``, relative to ``root``; missing ones too) and every folder listed
    (``folders``), or ``{"incomplete": why}`` past the record's limits; None if the view did
    not end cleanly (then nothing it saw is trusted).
    """

    def __init__(self, root: Path, mountpoint: Path):
        self.root = Path(root).resolve()
        self.mountpoint = Path(mountpoint)
        self._proc: subprocess.Popen | None = None
        self._record_path = self.mountpoint.with_name(self.mountpoint.name + ".reads.json")
        self._record: dict | None = None
        #: How the serving process ended, for a record that is missing.
        self.exit_status: int | None = None
        self.stderr = ""

    def __enter__(self) -> CheckoutView:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self._record_path.unlink(missing_ok=True)
        project = Path(__file__).resolve().parents[2]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "workers.sandbox.view", str(self.root),
             str(self.mountpoint), str(self._record_path)],
            cwd=project, env={**os.environ, "PYTHONPATH": str(project)},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_SECONDS
        while not os.path.ismount(self.mountpoint):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                error = self._end()
                raise ViewError(f"the view did not start: {error or 'it timed out'}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self._end()

    def _end(self) -> str:
        """Unmount, wait for the serving process to write its record; its stderr, if any."""
        if self._proc is None:
            return ""
        # Whether or not it looks mounted: asking means a request to the view, which a busy
        # view may not answer in time, and unmounting what is not mounted does nothing.
        _unmount(self.mountpoint)
        try:
            _, err = self._proc.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            _, err = self._proc.communicate()
            err += f"\n(it had not ended {STOP_SECONDS:g} s after the unmount)".encode()
        clean = self._proc.returncode == 0
        self.exit_status = self._proc.returncode
        self._proc = None
        if clean and self._record_path.is_file():
            if self._record_path.stat().st_size > MAX_RECORD_BYTES:
                self._record = {"incomplete": f"its record is over {MAX_RECORD_BYTES:,} bytes"}
            else:
                self._record = json.loads(self._record_path.read_text())
        self._record_path.unlink(missing_ok=True)
        self.stderr = err.decode(errors="replace").strip()[-2000:]
        return self.stderr

    def record(self) -> dict | None:
        return self._record


def _unmount(path: Path) -> None:
    # Lazily: a process of the job still holding a file open must not keep the view alive.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(os.fsencode(path), _MNT_DETACH) == 0:
        return
    subprocess.run(["fusermount", "-u", "-z", str(path)], capture_output=True, check=False)


def _serve(root: str, mountpoint: str, record: str) -> None:
    from fuse import FUSE, FuseOSError, Operations

    class Recording(Operations):
        """Read-only passthrough that notes every path asked about."""

        def __init__(self) -> None:
            self.files: set[str] = set()
            self.folders: set[str] = set()
            self.past_limit = False
            self.lock = threading.Lock()

        def _real(self, path: str, *, folder: bool = False) -> str:
            relative = path.lstrip("/") or ROOT
            with self.lock:
                noted = self.folders if folder else self.files
                if len(noted) < MAX_PATHS:
                    noted.add(relative)
                elif relative not in noted:
                    # A job that looks at more is keyed by the whole tree: the record
                    # stays bounded however many names it tries.
                    self.past_limit = True
            return os.path.join(root, path.lstrip("/"))

        def _os(self, call, *args):
            try:
                return call(*args)
            except OSError as exc:
                raise FuseOSError(exc.errno or errno.EIO) from None

        def getattr(self, path, fh=None):
            found = self._os(os.lstat, self._real(path))
            # Read-only, and readable by the job's user: the files are the worker's.
            mode = found.st_mode & ~0o222 | 0o444 | (0o111 if found.st_mode & 0o111 else 0)
            return {
                "st_mode": mode, "st_nlink": found.st_nlink, "st_size": found.st_size,
                "st_mtime": found.st_mtime, "st_atime": found.st_atime,
                "st_ctime": found.st_ctime, "st_uid": 0, "st_gid": 0,
            }

        def readdir(self, path, fh):
            names = self._os(os.listdir, self._real(path, folder=True))
            return [".", "..", *names]

        def readlink(self, path):
            return self._os(os.readlink, self._real(path))

        def access(self, path, amode):
            if amode & os.W_OK:
                raise FuseOSError(errno.EROFS)
            self._os(os.lstat, self._real(path))
            return 0

        def open(self, path, flags):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND | os.O_CREAT):
                raise FuseOSError(errno.EROFS)
            return self._os(os.open, self._real(path), os.O_RDONLY | os.O_NOFOLLOW)

        def read(self, path, size, offset, fh):
            return self._os(os.pread, fh, size, offset)

        def release(self, path, fh):
            os.close(fh)
            return 0

        def statfs(self, path):
            found = self._os(os.statvfs, root)
            return {key: getattr(found, key) for key in (
                "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                "f_ffree", "f_favail", "f_flag", "f_namemax")}

    operations = Recording()
    # allow_other: the job runs as another user, in a user namespace of its own.
    FUSE(operations, mountpoint, foreground=True, ro=True, allow_other=True, nothreads=False,
         fsname="peakwatch-checkout")
    out = Path(record)
    record = {"files": sorted(operations.files), "folders": sorted(operations.folders)}
    if operations.past_limit:
        record = {"incomplete": f"the import looked at more than {MAX_PATHS:,} paths"}
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as handle:
        json.dump(record, handle)
    os.replace(handle.name, out)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m workers.sandbox.view ROOT MOUNTPOINT RECORD")
    _serve(*sys.argv[1:])
