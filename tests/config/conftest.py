"""Every test here starts with no ``GPU_AUDIT_<KEY>`` variable set, whatever the shell exported."""

from __future__ import annotations

import pytest

from gpu_audit.config import CheckPolicy, env_name
from gpu_audit.config.policy import keys_of


@pytest.fixture(autouse=True)
def _no_policy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in keys_of(CheckPolicy):
        monkeypatch.delenv(env_name(key), raising=False)
