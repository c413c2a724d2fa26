"""A stand-in for NVIDIA Transformer Engine, for the conformance suite only.

Transformer Engine's PyPI build needs CUDA, so the conformance venv cannot install it. The
released Megatron-Bridge still needs it to import and to finalise a config:

- ``megatron.bridge.peft.lora_layers`` imports ``transformer_engine.pytorch`` unconditionally, and
  Megatron-Core (``fp8_utils``, ``extensions/transformer_engine``) imports several submodules
  and subclasses a few of its classes when TE is importable;
- Megatron-Core's ``get_te_version`` reads ``transformer_engine.__version__`` (every
  ``is_te_min_version`` check of the overlap code goes through it);
- ``OptimizerConfig.__post_init__`` inspects the signature of
  ``transformer_engine.pytorch.optimizers.FusedAdam`` (precision-aware optimizer).

So this package has exactly two things with meaning, ``__version__`` and ``FusedAdam``'s
signature. Every other ``transformer_engine.*`` module and attribute the release asks for at
import time is an inert placeholder (``_inert.py``): a class that can be subclassed and
isinstance-checked but refuses to be instantiated or called, so a code path that would need
real TE kernels fails loudly instead of passing.

The version is read from the environment variable BRIDGE_TE_STUB_VERSION each time
``__version__`` is looked up (default DEFAULT_VERSION), so one process can present the
version of the case it runs. "TE absent" is modelled by leaving this directory off sys.path.
tests/conformance/harness.py is the only thing that puts it on sys.path.
"""

import os as _os
import sys as _sys

from . import _inert

DEFAULT_VERSION = "2.9.0"
__stub__ = True
__path__ = list(__path__)  # noqa: F821  (a package; submodules come from _inert's finder)

_inert.install(__name__)


def __getattr__(name):
    if name == "__version__":
        return _os.environ.get("BRIDGE_TE_STUB_VERSION") or DEFAULT_VERSION
    if name.startswith("__"):
        raise AttributeError(name)
    return _inert.attribute(_sys.modules[__name__], name)
