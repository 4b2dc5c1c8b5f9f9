"""``gpu-audit check``: the pre-run checklist for CI on GPU runners.

The check policy (:class:`gpu_audit.config.CheckPolicy`, the one policy plus the check's own
keys) says what makes a runner fit. The checks (:mod:`.gpus`, :mod:`.usage`, :mod:`.software`,
:mod:`.findings`, registered in :mod:`.registry`) are pure functions over a scan and the
scan rules' findings that give pass/warn/fail/skip/unknown with evidence; a check that views a
rule's finding maps it rather than judging again. :func:`gpu_audit.check.engine.judge` puts them
together into a :class:`~gpu_audit.check.results.CheckReport` whose verdict is the exit code.
Optional validation stages (:mod:`.stages`) prove that CUDA work actually runs. The checks draw
nothing: the JSON document, the terminal checklist, JUnit and GitHub's summary render a report
in :mod:`gpu_audit.report` (``check_document``, ``check_terminal``, ``junit``, ``github``).
"""

from __future__ import annotations
