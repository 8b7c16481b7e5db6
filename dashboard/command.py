"""The ``peakwatch`` command that ``pip install .`` puts on the PATH.

``peakwatch planner ...`` is the planner's command line (``python3 -m planner``); every other
word is a Django management command (``manage.py``), e.g. ``peakwatch migrate``,
``peakwatch track``, ``peakwatch run``. One name, so a deployment never needs the checkout:
an installed package finds its settings, templates and front end on its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PLANNER_WORDS = ("planner", "plan")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in PLANNER_WORDS:
        from planner.cli import build_parser
        from planner.cli import main as planner_main

        return planner_main(args[1:], build_parser(prog=f"peakwatch {args[0]}"))
    if not args or args[0] in ("-h", "--help", "help") and len(args) == 1:
        sys.stdout.write(
            "peakwatch planner COMMAND ...   plan problems, compile models "
            "('peakwatch planner --help')\n"
            "peakwatch COMMAND ...           a dashboard or worker command (listed below)\n\n"
        )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["peakwatch", *args])
    return 0


if __name__ == "__main__":
    sys.exit(main())
