"""The one policy. Every key of every table is declared once in :mod:`.schema` (type, default,
range, unit, description, readers, variable, flag; ``docs/settings.md`` and the JSON Schema of
``gpu-audit.toml`` are generated from it by :mod:`.reference`). The typed policies are
:mod:`.policy` and, for the keys only check reads, :mod:`.check_policy`; the files they are read
from :mod:`.files`, and the layers that make the policy in force :mod:`.load`.
``gpu-audit validate``'s own table is read in :mod:`.validate_config` (flag >
``GPU_AUDIT_VALIDATE_<KEY>`` > file > default).

Precedence: flag > ``GPU_AUDIT_<KEY>`` environment variable > file > default. Names are imported
on first use, so a rule that needs only :class:`Policy` loads nothing else.
"""

from gpu_audit.lazy import exports

_EXPORTS = {
    "ENV_PREFIX": "gpu_audit.config.load",
    "MODES": "gpu_audit.config.policy",
    "STAGES": "gpu_audit.config.policy",
    "CheckPolicy": "gpu_audit.config.check_policy",
    "Policy": "gpu_audit.config.policy",
    "check_keys": "gpu_audit.config.check_policy",
    "check_value": "gpu_audit.config.files",
    "env_name": "gpu_audit.config.load",
    "find_config_file": "gpu_audit.config.files",
    "key_line": "gpu_audit.config.files",
    "load_check_policy": "gpu_audit.config.check_policy",
    "load_policy": "gpu_audit.config.load",
    "policy_keys": "gpu_audit.config.policy",
    "read_table": "gpu_audit.config.files",
    "read_validate_config": "gpu_audit.config.validate_config",
    "read_validate_environment": "gpu_audit.config.validate_config",
    "unknown_key_error": "gpu_audit.config.files",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
