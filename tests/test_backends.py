from __future__ import annotations

from gpu_audit.rules.duplicates import instance_port, normalise_args, split_program
from tests import builders as b


def test_split_program_sees_through_the_interpreter():
    assert split_program(["/v/bin/python3", "-u", "/v/bin/uvicorn", "app:app"]).program == "uvicorn"
    assert split_program(["python3.11", "-X", "dev", "-m", "celery", "worker"]).args == ("worker",)
    assert split_program(["python3.11", "-m", "celery", "worker"]).program == "celery"
    assert split_program(["/usr/bin/Xorg", "vt2"]).program == "Xorg"
    assert split_program([]).program == ""


def test_per_instance_values_are_set_aside():
    a = normalise_args(("app:app", "--port", "8000", "--host", "0.0.0.0"))
    c = normalise_args(("app:app", "--port=3001", "--host", "0.0.0.0"))
    assert a == ("app:app", "--port", "*", "--host", "0.0.0.0")
    assert c == ("app:app", "--port=*", "--host", "0.0.0.0")
    assert normalise_args(("-b", "0.0.0.0:8000")) == normalise_args(("-b", "0.0.0.0:9000"))
    assert normalise_args(("--lr", "0.1")) != normalise_args(("--lr", "0.2"))
    kernel = "/run/user/1000/jupyter/kernel-6f1c7c1e-2f6d-4c7b-9a3e-3f0a0e3c1a2b.json"
    other = "/run/user/1000/jupyter/kernel-0a1b2c3d-2f6d-4c7b-9a3e-3f0a0e3c1a2b.json"
    assert normalise_args(("-f", kernel)) == normalise_args(("-f", other))


def test_instance_port_prefers_listening_socket_then_arguments():
    assert instance_port(b.uvicorn(1, 8000)) == 8000
    p = b.process(2, 1, ["gunicorn", "--bind", "127.0.0.1:5000", "app:app"])
    assert instance_port(p) == 5000
    assert instance_port(b.process(3, 1, ["python", "serve.py", "--port=7000"])) == 7000
    assert instance_port(b.process(4, 1, ["python", "train.py"])) is None
