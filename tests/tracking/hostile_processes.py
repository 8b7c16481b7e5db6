"""A hostile model file: each attack on the host's processes that issue 32 names, and a
``reports.json`` handed back as a link, as ``build(attack)``. The containment tests and
``benchmarks/containment.py`` run it, as text, through the real sandbox; nothing imports it."""

import os
import sys
import threading
import time
from pathlib import Path

HOG = 64 << 20


def build(attack: str, target: str = ""):
    Path(os.environ["HOME"], "attack-started").write_text(repr(time.time()))
    if attack == "fork-bomb":
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    if attack == "thread-bomb":
        while True:
            try:
                threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
            except RuntimeError:
                time.sleep(0.01)
    if attack == "fork-bomb-hog":
        held = [b"x" * HOG]
        while True:
            try:
                if os.fork() == 0:
                    held.append(b"x" * HOG)  # each new process a share of its own
            except OSError:
                time.sleep(0.01)
    if attack == "link-reports":
        # Its reports: a link to a host path, which exists or not.
        os.symlink(target, sys.argv[2])
        os._exit(0)
    raise ValueError(attack)
