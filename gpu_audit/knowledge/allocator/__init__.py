"""PyTorch's allocator settings: everything gpu-audit knows about them, in one package.

- :mod:`.grammar`: the syntax of ``PYTORCH_ALLOC_CONF`` strings (tokens, entries, parse results);
- :mod:`.keys`: the keys torch knows, by release, and their limits;
- :mod:`.values`: what torch reads from each kind of value;
- :mod:`.checks`: the verdict on a string for a torch release, and its repair;
- :mod:`.variables`: which variable a release reads, and the quoted ``export`` line to paste.

Pure functions and data, standard library only: the monitor imports this inside the user's
training process.
"""

from gpu_audit.knowledge.allocator.checks import analyse, parse, repaired, with_settings
from gpu_audit.knowledge.allocator.grammar import (
    AllocConfError,
    ConfIssue,
    ParsedConf,
    Setting,
    Token,
    describe,
    normalised,
    pairs,
    raw_settings,
    render,
    split_alloc_conf,
    tokenize,
    with_setting,
)
from gpu_audit.knowledge.allocator.keys import (
    KEYS,
    LARGE_BUFFER_MB,
    KeySpec,
    max_split_minimum,
    scope,
    split_minimum,
    suggest_key,
    supports_expandable_segments,
)
from gpu_audit.knowledge.allocator.variables import (
    CUDA_VAR,
    NEW_VAR,
    NO_CACHING_VAR,
    EnvBehaviour,
    Resolution,
    alloc_conf_export,
    alloc_conf_variables,
    env_behaviour,
    export_line,
    fragmentation_remedy,
    resolve,
    shell_quote,
    variables_to_set,
)

__all__ = [
    "CUDA_VAR",
    "KEYS",
    "LARGE_BUFFER_MB",
    "NEW_VAR",
    "NO_CACHING_VAR",
    "AllocConfError",
    "ConfIssue",
    "EnvBehaviour",
    "KeySpec",
    "ParsedConf",
    "Resolution",
    "Setting",
    "Token",
    "alloc_conf_export",
    "alloc_conf_variables",
    "analyse",
    "describe",
    "env_behaviour",
    "export_line",
    "fragmentation_remedy",
    "max_split_minimum",
    "normalised",
    "pairs",
    "parse",
    "raw_settings",
    "render",
    "repaired",
    "resolve",
    "scope",
    "shell_quote",
    "split_alloc_conf",
    "split_minimum",
    "suggest_key",
    "supports_expandable_segments",
    "tokenize",
    "variables_to_set",
    "with_setting",
    "with_settings",
]
