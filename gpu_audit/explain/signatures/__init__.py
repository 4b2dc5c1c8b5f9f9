"""The catalogue of known failure messages: one module per failure class.

Each class module (``cuda_oom``, ``nccl``, ...) holds, together, every signature of its class:
the regex, the needles that prefilter lines, the title, severity and tier, an example line, and
the advice (explanation and remedy). :mod:`.registry` defines what a signature is and refuses
one without advice; :mod:`.catalogue` sets the order in which they are tried.
"""

from gpu_audit.explain.signatures.catalogue import (
    CLASS_DOCS,
    ORDER,
    RENAMED,
    SIGNATURE_BY_ID,
    SIGNATURES,
)
from gpu_audit.explain.signatures.registry import (
    CLASSES,
    TIERS,
    Advice,
    AdviceContext,
    CatalogueError,
    ClassDoc,
    Signature,
)

__all__ = [
    "CLASSES",
    "CLASS_DOCS",
    "ORDER",
    "RENAMED",
    "SIGNATURES",
    "SIGNATURE_BY_ID",
    "TIERS",
    "Advice",
    "AdviceContext",
    "CatalogueError",
    "ClassDoc",
    "Signature",
]
