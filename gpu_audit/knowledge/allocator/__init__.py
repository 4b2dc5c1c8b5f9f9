"""PyTorch's allocator settings: everything gpu-audit knows about them, in one package.

- :mod:`.grammar`: the syntax of ``PYTORCH_ALLOC_CONF`` strings (tokens, entries, parse results);
- :mod:`.keys`: the keys torch knows, by release, and their limits;
- :mod:`.values`: what torch reads from each kind of value;
- :mod:`.checks`: the verdict on a string for a torch release, and its repair;
- :mod:`.variables`: which variable a release reads, and the quoted ``export`` line to paste.

Pure functions and data, standard library only: the monitor imports this inside the user's
training process.
"""

from gpu_audit.lazy import exports

# Imported on first use: a scan needs the variable names, not the parser.
_EXPORTS = {
    "AllocConfError": "gpu_audit.knowledge.allocator.grammar",
    "BOTH_VARS": "gpu_audit.knowledge.allocator.names",
    "CUDA_VAR": "gpu_audit.knowledge.allocator.names",
    "ConfIssue": "gpu_audit.knowledge.allocator.grammar",
    "EXPANDABLE_CONFLICTS": "gpu_audit.knowledge.allocator.keys",
    "EXPANDABLE_CONFLICTS_FIXED_IN": "gpu_audit.knowledge.allocator.keys",
    "EnvBehaviour": "gpu_audit.knowledge.allocator.variables",
    "HIP_VAR": "gpu_audit.knowledge.allocator.names",
    "ALIAS_RELEASE": "gpu_audit.knowledge.allocator.variables",
    "FRAGMENTATION_MIN_BYTES": "gpu_audit.knowledge.allocator.limits",
    "KEYS": "gpu_audit.knowledge.allocator.keys",
    "KeySpec": "gpu_audit.knowledge.allocator.keys",
    "LARGE_BUFFER_MB": "gpu_audit.knowledge.allocator.keys",
    "NEW_VAR": "gpu_audit.knowledge.allocator.names",
    "NO_CACHING_VAR": "gpu_audit.knowledge.allocator.names",
    "ParsedConf": "gpu_audit.knowledge.allocator.grammar",
    "Resolution": "gpu_audit.knowledge.allocator.variables",
    "Setting": "gpu_audit.knowledge.allocator.grammar",
    "Token": "gpu_audit.knowledge.allocator.grammar",
    "alloc_conf_export": "gpu_audit.knowledge.allocator.variables",
    "alloc_conf_variables": "gpu_audit.knowledge.allocator.variables",
    "analyse": "gpu_audit.knowledge.allocator.checks",
    "deprecation_alias_release": "gpu_audit.knowledge.allocator.variables",
    "deprecation_warning_releases": "gpu_audit.knowledge.allocator.variables",
    "describe": "gpu_audit.knowledge.allocator.grammar",
    "env_behaviour": "gpu_audit.knowledge.allocator.variables",
    "expandable_conflicts": "gpu_audit.knowledge.allocator.keys",
    "export_line": "gpu_audit.knowledge.allocator.variables",
    "fragmentation_remedy": "gpu_audit.knowledge.allocator.variables",
    "fragmentation_setting": "gpu_audit.knowledge.allocator.variables",
    "max_split_minimum": "gpu_audit.knowledge.allocator.keys",
    "normalised": "gpu_audit.knowledge.allocator.grammar",
    "pairs": "gpu_audit.knowledge.allocator.grammar",
    "parse": "gpu_audit.knowledge.allocator.checks",
    "raw_settings": "gpu_audit.knowledge.allocator.grammar",
    "render": "gpu_audit.knowledge.allocator.grammar",
    "repaired": "gpu_audit.knowledge.allocator.checks",
    "resolve": "gpu_audit.knowledge.allocator.variables",
    "scope": "gpu_audit.knowledge.allocator.keys",
    "shell_quote": "gpu_audit.knowledge.allocator.variables",
    "split_alloc_conf": "gpu_audit.knowledge.allocator.grammar",
    "split_minimum": "gpu_audit.knowledge.allocator.keys",
    "suggest_key": "gpu_audit.knowledge.allocator.keys",
    "supports_expandable_segments": "gpu_audit.knowledge.allocator.keys",
    "tokenize": "gpu_audit.knowledge.allocator.grammar",
    "variables_to_set": "gpu_audit.knowledge.allocator.variables",
    "with_setting": "gpu_audit.knowledge.allocator.grammar",
    "with_settings": "gpu_audit.knowledge.allocator.checks",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
