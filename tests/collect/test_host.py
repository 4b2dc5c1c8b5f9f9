from __future__ import annotations

import psutil

from gpu_audit.collect.host import count_nvidia_pci_devices, detect_container, read_host


def test_host_figures_match_the_os():
    host, errors = read_host()
    assert errors == []
    assert host.os == "Linux"
    assert host.memory_total_bytes == psutil.virtual_memory().total
    assert host.swap_total_bytes == psutil.swap_memory().total
    assert host.cpu_count and host.cpu_count >= 1
    assert host.boot_time and host.boot_time.endswith("Z")


def test_container_detection_from_marker_files_and_cgroups(tmp_path):
    assert detect_container(tmp_path, environ={}) is None
    (tmp_path / ".dockerenv").touch()
    assert detect_container(tmp_path, environ={}) == "docker"
    assert (
        detect_container(tmp_path, environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    )
    other = tmp_path / "other"
    (other / "proc/1").mkdir(parents=True)
    (other / "proc/1/cgroup").write_text("0::/kubepods/burstable/pod1/abc\n")
    assert detect_container(other, environ={}) == "kubernetes"


def test_nvidia_gpus_are_counted_on_the_pci_bus_not_their_audio_functions(tmp_path):
    def device(name, vendor, klass):
        d = tmp_path / name
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(klass + "\n")

    device("0000:01:00.0", "0x10de", "0x030000")  # VGA controller
    device("0000:01:00.1", "0x10de", "0x040300")  # its HDMI audio
    device("0000:02:00.0", "0x10de", "0x030200")  # 3D controller (datacentre GPU)
    device("0000:00:02.0", "0x8086", "0x030000")  # integrated Intel graphics
    assert count_nvidia_pci_devices(tmp_path) == 2
    assert count_nvidia_pci_devices(tmp_path / "missing") is None
