"""The job watch's look costs little whatever the job does, and each kill names its limit.

No sandbox here: a job of made-up processes, so that what a look reads can be counted
(tests/tracking/test_sandbox_containment.py runs the real attacks).
"""

from __future__ import annotations

import os

import pytest

from workers import job_limits
from workers.job_watch import JobWatch
from workers.sandbox import Limits

#: Above any pid the kernel gives out (pid_max is at most 2**22): nothing in /proc.
MADE_UP = 1 << 30


class MadeUpJob:
    """A job of ``count`` processes that are not there; kill() records that it was called."""

    def __init__(self, count: int, *, threads: int = 1, rss_pages: int = 1):
        self.root = job_limits.Task(MADE_UP, 1, MADE_UP, 1)
        self.outside = 1
        self.killed = 0
        self.tasks = [
            job_limits.Task(MADE_UP + 1 + n, MADE_UP, MADE_UP, threads, start=n, rss=rss_pages)
            for n in range(count)
        ]

    def members(self) -> list[job_limits.Task]:
        return list(self.tasks)

    def kill(self) -> None:
        self.killed += 1


@pytest.fixture
def reads(monkeypatch) -> list[tuple[str, int]]:
    """Every costly read a look makes, by kind and process."""
    made: list[tuple[str, int]] = []
    monkeypatch.setattr(job_limits, "memory_of", lambda pid: made.append(("smaps", pid)) or 0)
    monkeypatch.setattr(
        job_limits, "_held_files", lambda pid: made.append(("files", pid)) or iter(())
    )
    return made


def watch(job: MadeUpJob, **limits) -> JobWatch:
    return JobWatch(
        job, memory_bytes=limits.pop("memory_bytes", 1 << 30),
        processes=limits.pop("processes", 64), **limits,
    )


def test_the_process_limit_is_decided_on_the_count_before_any_costly_read(reads):
    job = MadeUpJob(500)

    breach = watch(job).check()

    assert breach == (
        "the job was killed at 500 processes, at its process limit of 64 "
        "(PEAKWATCH_SANDBOX_PROCESSES=64)"
    )
    assert reads == []


def test_a_look_reads_a_bounded_number_of_processes_and_the_rest_in_later_looks(reads):
    job = MadeUpJob(10, rss_pages=1 << 20)  # 4 GiB resident each: the memory must be read
    looking = watch(job, processes=64)
    looking.reads = job_limits.ProcessReads(per_look=4)

    looking.check()
    first = [pid for kind, pid in reads if kind == "smaps"]
    reads.clear()
    looking.check()
    looking.check()
    later = [pid for kind, pid in reads if kind == "smaps"]

    assert len(first) == 4 and len([kind for kind, _ in reads if kind == "files"]) == 8
    assert set(first) | set(later) == {task.pid for task in job.tasks}


def test_memory_resident_within_the_limit_needs_no_smaps_read(reads):
    job = MadeUpJob(8, rss_pages=1000)

    assert watch(job).check() is None

    assert [kind for kind, _ in reads] == ["files"] * 8


def test_a_thread_bomb_is_killed_on_the_task_limit_which_names_the_thread_setting(reads):
    job = MadeUpJob(2, threads=40)

    breach = watch(job, processes=64, threads=16).check()

    assert breach == (
        "the job was killed at 80 tasks (2 processes and 78 threads more), at its thread "
        "limit: 80 processes and threads together (PEAKWATCH_SANDBOX_PROCESSES=64 + "
        "PEAKWATCH_SANDBOX_THREADS=16; raise PEAKWATCH_SANDBOX_THREADS for more threads)"
    )
    assert reads == []


def test_the_kernels_limit_is_the_number_the_settings_name():
    limits = Limits.from_settings({"PROCESSES": 24, "THREADS": 8})

    assert (limits.processes, limits.threads, limits.tasks) == (24, 8, 32)
    assert Limits(threads=0).tasks == Limits().processes == 64
    # By default, four threads per core more, for the thread pools that start one per core.
    assert Limits().tasks == 64 + 4 * (os.cpu_count() or 1)
    assert Limits.from_settings({}).threads == Limits().threads
