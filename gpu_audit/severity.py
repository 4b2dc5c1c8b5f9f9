"""How bad a finding is: its own module, so that a command can parse ``--fail-on`` before the
data model (and msgspec) is loaded."""

from __future__ import annotations

import enum


class Severity(enum.Enum):
    """How bad a finding is; ordered, so thresholds can compare."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_ORDER.index(self)

    def __lt__(self, other: Severity) -> bool:
        return self.rank < other.rank

    def __le__(self, other: Severity) -> bool:
        return self.rank <= other.rank

    def __gt__(self, other: Severity) -> bool:
        return self.rank > other.rank

    def __ge__(self, other: Severity) -> bool:
        return self.rank >= other.rank

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r} (expected one of: {names})") from None


_SEVERITY_ORDER = [Severity.INFO, Severity.WARNING, Severity.ERROR, Severity.CRITICAL]
