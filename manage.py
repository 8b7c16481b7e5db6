#!/usr/bin/env python
"""Django's command-line utility for Peakwatch: the ``peakwatch`` command, from a checkout."""

import sys

from dashboard.command import main

if __name__ == "__main__":
    sys.exit(main())
