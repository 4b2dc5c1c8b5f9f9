"""gpu-audit's own errors: each carries a message a user can act on.

The CLI turns them into exit code 3 (UNKNOWN) without a traceback; ``-v`` adds the traceback.
"""

from __future__ import annotations


class GpuAuditError(Exception):
    """Base class: something stopped gpu-audit from judging the machine."""

    exit_code = 3


class InputError(GpuAuditError):
    """A file or value given by the user could not be read or is malformed."""


class ConfigError(GpuAuditError):
    """A configuration or policy file is invalid; the message names file, line and key."""


class UsageError(GpuAuditError):
    """Flags that cannot work together or a value out of range."""
