"""Run a compile job, and with it a tracked repository's code, in a locked-down child process.

Model factories, pipelines and planners come from repositories Peakwatch tracks, pull
requests from strangers included, so none of it runs in a worker. The child

- gets a scrubbed environment: ``PATH``, ``HOME`` and ``TMPDIR`` inside its scratch folder,
  nothing else (no database or broker URL, no tokens, no secret key);
- runs in its scratch folder (the commit's checkout and the artifacts) and can write
  nowhere else;
- runs as an unprivileged user with no capabilities and ``no_new_privs``: a worker running
  as root starts it as ``Limits.user``/``Limits.group`` (nobody/nogroup by default), which
  owns the scratch folder; any other worker runs it as itself;
- has limits on the whole job, all its processes together (memory, shared memory and
  in-memory files included; processes, and threads beyond them; its scratch folder's bytes
  and files: :mod:`workers.job_limits`), on each process (address space, CPU time, file
  size, open files) and on wall-clock time; a job killed on a limit fails with a message
  that names the limit and its setting;
- with bubblewrap (Debian's ``bubblewrap``) present, runs in new user, network, PID, IPC
  and UTS namespaces (no network at all, no nested user namespaces), and sees only
  ``/usr``, the files of ``/etc`` that Python, TVM and gcc read (no shadow, ssh or TLS
  keys), Python and the planner read-only, a minimal ``/dev`` of its own with a private
  ``/dev/shm`` (no device nodes to make or open; a GPU board's job gets its GPU's nodes
  alone): the *full* sandbox. Without it only the user,
  the limits and the scrubbed environment hold: the *reduced* sandbox, which the boards
  page shows with its reason, and which runs nothing unless ``Limits.allow_reduced``
  (``PEAKWATCH_SANDBOX_ALLOW_REDUCED=1``) says so;
- is killed whole by the first look of the job watch that finds a limit crossed (it counts
  processes and threads every 0.2 s, apart from its costlier reads of memory), or at once
  on its wall clock: its PID namespace's first process is killed, and the kernel kills
  every other process of the namespace with it (:mod:`workers.sandbox.containment`).

The modules: :mod:`~workers.sandbox.limits` (what a job may use),
:mod:`~workers.sandbox.bwrap` (bubblewrap's command line), :mod:`~workers.sandbox.confinement`
(rlimits, user and mounts, set before the job runs), :mod:`~workers.sandbox.containment`
(finding and killing the job's processes) and :mod:`~workers.sandbox.run` (``run_job``).
"""

from workers.sandbox.bwrap import PLANNER_DIR, PROJECT_ROOT, gpu_nodes
from workers.sandbox.limits import Limits, SandboxError
from workers.sandbox.run import Mode, mode, refusal, run_job, run_probe

__all__ = [
    "PLANNER_DIR", "PROJECT_ROOT", "Limits", "Mode", "SandboxError", "gpu_nodes", "mode",
    "refusal", "run_job", "run_probe",
]
