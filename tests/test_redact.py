from __future__ import annotations

from gpu_audit.redact import MASK, redact_cmdline, redact_env, redact_text


def test_secret_options_in_both_spellings_are_masked():
    argv = [
        "python",
        "train.py",
        "--hf-token",
        "hf_abcdefghijklmnopqrstuvwxyz",
        "--password=hunter2",
        "--api-key",
        "k",
        "WANDB_API_KEY=abc123",
    ]
    out = redact_cmdline(argv)
    assert out == [
        "python",
        "train.py",
        "--hf-token",
        MASK,
        "--password=" + MASK,
        "--api-key",
        MASK,
        "WANDB_API_KEY=" + MASK,
    ]
    assert "hunter2" not in " ".join(out)


def test_url_credentials_and_known_token_shapes_are_masked_anywhere():
    assert redact_text("postgres://bob:s3cret@db:5432/x") == f"postgres://bob:{MASK}@db:5432/x"
    assert redact_text("see https://h/x?token=abc&y=1") == f"see https://h/x?token={MASK}&y=1"
    assert MASK in redact_text("ghp_" + "a" * 36)
    assert MASK in redact_text("AKIA" + "ABCDEFGHIJKLMNOP")


def test_ml_arguments_that_merely_mention_tokens_are_kept():
    argv = ["python", "gen.py", "--tokenizer", "gpt2", "--max-new-tokens", "64", "--author", "me"]
    assert redact_cmdline(argv) == argv


def test_environment_values_are_masked_by_name_and_by_shape():
    env = {
        "HF_TOKEN": "x",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "DB": "mysql://u:p@h/d",
    }
    out = redact_env(env)
    assert out["HF_TOKEN"] == MASK
    assert out["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert out["DB"] == f"mysql://u:{MASK}@h/d"
