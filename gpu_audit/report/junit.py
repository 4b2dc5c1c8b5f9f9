"""The check as a JUnit XML report: one test case per check (and per GPU).

Kept to the subset GitLab's test report and GitHub's JUnit actions both read:
``testsuites > testsuite > testcase > failure|error|skipped|system-out``, with every counter
present. A failed check is a ``failure`` (type CRITICAL), a check that could not be judged an
``error`` (type UNKNOWN), a skipped one ``skipped``; a warning passes with its text in
``system-out`` (JUnit has no warning state; the exit code 1 carries it). GitLab shows
``classname`` as the suite and drops duplicate (classname, name) pairs, so the host and the
subject go into ``classname`` and repeated names get a ``#2`` suffix.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from gpu_audit import __version__
from gpu_audit.check.results import CheckReport, CheckResult, CheckStatus
from gpu_audit.redact import redact_data
from gpu_audit.report.escape import xml_text

# Characters XML 1.0 cannot carry at all (a process name or log line may contain them).
_text = xml_text


def classname(hostname: str, subject: str, gpu_index: object = None) -> str:
    """``node-07`` + ``gpu:0`` -> ``node-07.gpu0``; ``stage:imports`` -> ``stage-imports``.

    A process (``pid:N``) is named by its GPU, ``node-07.gpu0.process``, never by its pid: a
    test's identity must stay the same from one run to the next for CI dashboards to follow it."""
    if subject.startswith("pid:"):
        where = f"gpu{gpu_index}." if isinstance(gpu_index, int) else ""
        return f"{hostname}.{where}process"
    compact = re.sub(r":(\d+)$", r"\1", subject).replace(":", "-")
    return f"{hostname}.{compact}"


def _body(result: CheckResult) -> str:
    parts = [result.summary]
    if result.remedy:
        parts.append(f"fix: {result.remedy}")
    if result.evidence:
        parts.append("evidence: " + json.dumps(redact_data(result.evidence), sort_keys=True,
                                                default=str))
    return _text("\n\n".join(parts))


def _seconds(value: float | None) -> str:
    return f"{(value or 0.0):.3f}"


def render_unknown(hostname: str, reason: str, generated_at: str) -> str:
    """The JUnit file of a check that could not judge (a broken policy, an unreadable input):
    one test case in error, so CI still has a test report that says why."""
    root = ET.Element("testsuites", {"name": "gpu-audit", "tests": "1", "failures": "0",
                                     "errors": "1", "skipped": "0", "time": "0.000"})
    suite = ET.SubElement(root, "testsuite", {
        "name": f"gpu-audit check@{_text(hostname)}", "tests": "1", "failures": "0",
        "errors": "1", "skipped": "0", "time": "0.000", "timestamp": generated_at,
        "hostname": _text(hostname)})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", "UNKNOWN"), ("exit_code", "3"),
                        ("tool_version", __version__)):
        ET.SubElement(properties, "property", {"name": name, "value": value})
    case = ET.SubElement(suite, "testcase", {"classname": _text(classname(hostname, "host")),
                                             "name": "gpu-audit", "time": "0.000"})
    ET.SubElement(case, "error", {"message": _text(reason), "type": "UNKNOWN"}).text = \
        _text(reason)
    ET.indent(root, space="  ")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")


def render_junit(report: CheckReport) -> str:
    """The XML document as text (UTF-8 declaration included)."""
    counts = report.counts()
    tests = len(report.results)
    failures, errors, skipped = counts["fail"], counts["unknown"], counts["skip"]
    total_time = _seconds(report.duration_s)
    host = report.hostname

    root = ET.Element("testsuites", {
        "name": "gpu-audit", "tests": str(tests), "failures": str(failures),
        "errors": str(errors), "skipped": str(skipped), "time": total_time,
    })
    suite = ET.SubElement(root, "testsuite", {
        "name": f"gpu-audit check@{_text(host)}", "tests": str(tests),
        "failures": str(failures), "errors": str(errors), "skipped": str(skipped),
        "time": total_time, "timestamp": report.generated_at, "hostname": _text(host),
    })
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", report.verdict.name), ("exit_code", str(report.exit_code)),
                        ("tool_version", __version__),
                        ("policy", report.policy.source or "built-in defaults")):
        ET.SubElement(properties, "property", {"name": name, "value": _text(value)})

    seen: dict[tuple[str, str], int] = {}
    for result in report.results:
        cls = _text(classname(host, result.subject, result.evidence.get("gpu_index")))
        name = _text(result.id)
        seen[(cls, name)] = seen.get((cls, name), 0) + 1
        if seen[(cls, name)] > 1:
            name = f"{name} #{seen[(cls, name)]}"
        case = ET.SubElement(suite, "testcase", {"classname": cls, "name": name,
                                                 "time": _seconds(result.duration_s)})
        message = _text(result.summary)
        if result.status is CheckStatus.FAIL:
            ET.SubElement(case, "failure", {"message": message, "type": "CRITICAL"}).text = \
                _body(result)
        elif result.status is CheckStatus.UNKNOWN:
            ET.SubElement(case, "error", {"message": message, "type": "UNKNOWN"}).text = \
                _body(result)
        elif result.status is CheckStatus.SKIP:
            ET.SubElement(case, "skipped", {"message": message})
            continue
        prefix = "WARNING: " if result.status is CheckStatus.WARN else ""
        ET.SubElement(case, "system-out").text = prefix + _body(result)

    ET.indent(root, space="  ")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")
