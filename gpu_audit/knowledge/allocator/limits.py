"""Thresholds about the caching allocator that scan and validate share (no parser, no imports
beyond the units), kept apart so that a plain scan loads nothing more for them."""

from gpu_audit.units import MIB

# Unused reserved memory below which fragmentation is worth neither a finding nor a failed stage.
# The small pool's 2 MiB segments are always split, so a job holding little shows a share near
# 100% that costs nothing (seen on an H200: 2 MiB reserved, 99.6% of it in split blocks).
FRAGMENTATION_MIN_BYTES = 256 * MIB
