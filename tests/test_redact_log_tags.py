"""Log fields that only look like secrets are kept (NCCL's process tags, a ``SIGNATURE`` that
labels words), while the secrets beside them are still masked."""

from __future__ import annotations

import pytest

from gpu_audit.explain.api import classify_text
from gpu_audit.redact import MASK, redact_cmdline, redact_env, redact_text

KEPT = [
    "host:16901:16901 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "user:16901:16920 [0] NCCL INFO Channel 00/02 :    0   1",
    "login:16901:16920 [3] NCCL INFO cudaDriverVersion 12040",
    "auth01:16901:16920 [0] NCCL INFO comm 0x55d5 rank 0 nranks 2 - Init COMPLETE",
    "token-node-3:4101:4188 [7] include/shm.h:28 NCCL WARN Error while creating shared memory",
    "[default0]:user:16901:16920 [0] NCCL INFO Init COMPLETE",
    "ERROR_ID=cuda/illegal-memory-access",
    "SIGNATURE=CUDA error: an illegal memory access was encountered",
    "Signature: valid",
]


@pytest.mark.parametrize("line", KEPT)
def test_log_fields_that_hold_no_secret_are_kept(line: str) -> None:
    assert redact_text(line) == line
    assert redact_text(f"{line}\n{line}\n") == f"{line}\n{line}\n"


MASKED = [
    # (text, the secret it must not show)
    ("password:1234:5678", "5678"),  # no NCCL line: a password of digits
    ("user:1234:5678 logged in", "5678"),
    ("user:16901:16920 [0] NCCL INFO HF_TOKEN=MYSECRET", "MYSECRET"),
    ("user:16901:16920 [0] NCCL INFO using hf_a1B2c3D4e5F6g7H8i9J0k1",
     "hf_a1B2c3D4e5F6g7H8i9J0k1"),
    ("HF_TOKEN=MYSECRET user:16901:16920 [0] NCCL INFO x", "MYSECRET"),
    ("postgres://u:MYSECRET@db:16901:16920 [0] NCCL INFO x", "MYSECRET"),
    ("--password 16920 [0] NCCL INFO", "16920"),
    ("WEBHOOK_SIGNATURE=9f86d081884c7d659a2feaa0c55ad015", "9f86d081884c7d659a2feaa0c55ad015"),
    ("--signature=S3CR3T-v4lue", "S3CR3T-v4lue"),
    ("--signature abcdefghijklmnopqrstuvwxyzABCDEF", "abcdefghijklmnopqrstuvwxyzABCDEF"),
    ("Signature: 0x4a3f9c2e", "0x4a3f9c2e"),
    ("X-Amz-Signature: MYSECRET", "MYSECRET"),
    ("WEBHOOK_SIGNATURE=MYSECRET", "MYSECRET"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Signature=abcdef&x=1", "abcdef"),
]


@pytest.mark.parametrize(("text", "secret"), MASKED)
def test_secrets_beside_them_are_still_masked(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out and MASK in out, out
    assert secret not in " ".join(redact_cmdline(text.split())), text


def test_signature_variables_and_options_are_still_masked() -> None:
    assert redact_env({"WEBHOOK_SIGNATURE": "valid"}) == {"WEBHOOK_SIGNATURE": MASK}
    assert redact_cmdline(["app", "--signature", "abc123def"]) == ["app", "--signature", MASK]
    assert redact_cmdline(["app", "--password", "valid"]) == ["app", "--password", MASK]
    assert redact_text("--password=hunter") == f"--password={MASK}"  # only SIGNATURE labels words


def test_an_nccl_excerpt_in_explain_keeps_its_process_tags() -> None:
    log = ("user:16901:16920 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
           "user:16901:16920 [0] include/shm.h:28 NCCL WARN Error while creating shared memory "
           "segment /dev/shm/nccl-vzIpS6 (size 9637888)\n")
    incidents = [i for i in classify_text(log, torch_version=None) if i.cls == "nccl"]
    assert incidents
    assert "user:16901:16920 [0] include/shm.h:28 NCCL WARN" in incidents[0].excerpt
    assert MASK not in incidents[0].excerpt
