"""Remedies in the markdown report: commands in code blocks, sentences as text."""

from __future__ import annotations

from gpu_audit.model import Finding, Severity
from gpu_audit.report.markdown import findings_markdown
from gpu_audit.report.remedy import is_command, remedy_markdown
from gpu_audit.report.tables import finding_counts


def finding(remedy: str, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(id="x", severity=severity, subject="host", title="t", detail="d",
                   remedy=remedy)


def test_a_sentence_is_text_and_its_commands_are_code_spans():
    remedy = ("Drain the node, then reset the GPU with no process on it: "
              "`sudo nvidia-smi -r -i 0` (or reboot).")
    text = findings_markdown([finding(remedy)])
    assert "```" not in text
    assert "`sudo nvidia-smi -r -i 0`" in text and "Drain the node" in text


def test_a_command_is_a_code_block_and_the_sentence_after_it_is_not():
    remedy = ("export PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'\n"
              "(torch before 2.1 has no expandable_segments; tune 128 to just above the size of "
              "your largest frequent allocation, or upgrade torch)")
    text = remedy_markdown(remedy)
    assert text.startswith("```\nexport PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'\n```")
    assert "\n\n(torch before 2.1" in text
    assert text.count("```") == 2


def test_what_counts_as_a_command():
    assert is_command("pip install --force-reinstall 'torch==2.13.0'  # check it")
    assert is_command("sudo systemctl enable --now nvidia-persistenced")
    assert not is_command("Nothing to fix: consumer (GeForce, TITAN) GPUs do not have these")
    assert not is_command("Call torch.cuda.empty_cache() after the phases that peak.")


def test_counts_are_worded_for_their_number():
    many = [finding("x", Severity.ERROR), finding("x", Severity.ERROR),
            finding("x", Severity.WARNING), finding("x", Severity.INFO),
            finding("x", Severity.INFO)]
    assert finding_counts(many) == "2 errors, 1 warning, 2 info"
    assert finding_counts(many[1:3]) == "1 error, 1 warning"
