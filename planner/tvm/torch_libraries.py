"""PyTorch's model libraries made importable beside the CPU torch we pin.

torchvision from PyPI is built against a CUDA torch. Its compiled operators (``nms``,
``roi_align``, ...) fail to load beside our CPU torch, which torchvision tolerates, but its
``_meta_registrations`` module then registers fake kernels for those missing operators at
import and raises ``RuntimeError: operator torchvision::nms does not exist``. timm imports
torchvision, and so does transformers whenever torchvision is installed, so all three fail
alike. Their models need none of those operators: the module is replaced by an empty one
before any of them is imported.

The ``torchvision:``, ``timm:`` and ``transformers:`` sources call
:func:`prepare_torch_libraries`, and so does :func:`planner.tvm.repo_code.import_file` before
it runs a repository's file (a model file, a pipeline, a planner), so a model file's
``import torchvision``, ``import timm`` or ``from transformers import ...`` works as it does
in the built-in sources.
"""

from __future__ import annotations

import sys
import types

#: Modules that cannot run beside a CPU torch; what they register is missing here anyway.
STUBBED_MODULES = ("torchvision._meta_registrations",)


def prepare_torch_libraries() -> None:
    """Stub :data:`STUBBED_MODULES` before anything imports torchvision; cheap (it
    imports nothing, so a file that never imports torch pays nothing) and safe to repeat."""
    for name in STUBBED_MODULES:
        sys.modules.setdefault(name, types.ModuleType(name))
