"""The scan rules: one pure function per finding id, its docstring its documentation.

Adding a rule means writing one function with the :func:`rule` decorator in a module listed in
``RULE_MODULES`` (:mod:`.registry`), and one test. Helpers the rules share live beside them
(:mod:`.duplicates`: which processes are copies of one server).
"""

from gpu_audit.rules.registry import (
    RULE_MODULES,
    Rule,
    RuleFunc,
    all_rules,
    evaluate,
    exit_code,
    rule,
    worst,
)

__all__ = [
    "RULE_MODULES",
    "Rule",
    "RuleFunc",
    "all_rules",
    "evaluate",
    "exit_code",
    "rule",
    "worst",
]
