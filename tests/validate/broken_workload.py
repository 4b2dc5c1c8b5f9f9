"""A workload module that cannot be imported: it needs a package nobody installed."""

import gpu_audit_no_such_package  # noqa: F401


class Workload:
    def cycle(self, ctx):
        return {}
