"""The memory temperature beside the GPU's in the GPU table, and ``scan -v``'s detail line
(power-limit range, clocks, pending ECC/MIG modes)."""

from __future__ import annotations

import io

from rich.console import Console

from gpu_audit.report.markdown import render_scan_markdown
from gpu_audit.report.tables import gpu_details, temperatures
from gpu_audit.report.terminal import render_scan
from tests.builders import gpu, scan

H100 = dict(temperature_c=35, memory_temperature_c=38, memory_temperature_max_c=95,
            power_limit_w=700.0, power_default_limit_w=700.0, power_min_limit_w=200.0,
            power_max_limit_w=700.0, sm_clock_mhz=345, sm_clock_max_mhz=1980,
            graphics_clock_mhz=345, graphics_clock_max_mhz=1980, memory_clock_mhz=2619,
            memory_clock_max_mhz=2619, ecc_mode=True, ecc_mode_pending=False, mig_mode=False,
            mig_mode_pending=False, power_draw_w=71.5, pci_bus_id="00000000:18:00.0")


def rendered(scanned, width: int, verbose: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False, soft_wrap=False)
    render_scan(scanned, [], 0, console=console, verbose=verbose)
    return out.getvalue()


def test_memory_temperature_beside_the_gpus_where_reported():
    assert temperatures(gpu(0, **H100)) == "35 C (mem 38 C)"
    assert temperatures(gpu(0, temperature_c=46)) == "46 C"
    assert temperatures(gpu(0, temperature_c=None)) == "n/a"


def test_eighty_columns_keep_temperature_with_power_in_the_second_table():
    text = rendered(scan(gpus=[gpu(i, **H100) for i in range(2)]), 80)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    first, _, continued = text.partition("continued")
    assert "Temp" not in first and "35 C (mem 38 C)" in continued
    wide = rendered(scan(gpus=[gpu(i, **H100) for i in range(2)]), 200)
    assert "continued" not in wide and "35 C (mem 38 C)" in wide


def test_markdown_shows_the_memory_temperature_too():
    text = render_scan_markdown(scan(gpus=[gpu(0, **H100)]), [], 0)
    assert "35 C (mem 38 C)" in text


def test_detail_line_has_limits_clocks_and_pending_modes():
    line = gpu_details(gpu(0, **H100))
    assert line.startswith("GPU 0: power limit 700 W (default 700 W, settable 200-700 W)")
    assert "graphics 345/1980" in line and "memory 2619/2619 MHz" in line
    assert "memory temperature 38 C (limit 95 C)" in line
    assert "ECC on (off after a reset)" in line and "MIG off;" not in line
    assert line.endswith("MIG off")
    assert gpu_details(gpu(3, temperature_c=None, ecc_mode=None, mig_mode=None)) == "GPU 3: n/a"


def test_only_verbose_prints_the_detail_lines():
    scanned = scan(gpus=[gpu(0, **H100)])
    assert "settable 200-700 W" in rendered(scanned, 200, verbose=True)
    assert "settable" not in rendered(scanned, 200)


def test_mig_instances_are_listed_once_where_they_have_figures():
    from gpu_audit.model import MigDevice

    instances = [MigDevice(i, f"MIG-{i}", gpu_instance_id=gi, compute_instance_id=0,
                           profile=profile, memory_total_bytes=total << 20,
                           memory_used_bytes=0, sm_count=sms)
                 for i, (gi, profile, total, sms) in enumerate([(2, "3g.40gb", 40192, 60),
                                                                (7, "1g.10gb", 9984, 16)])]
    mig = gpu(1, **{**H100, "mig_mode": True}, mig_devices=instances)
    text = rendered(scan(gpus=[gpu(0, **H100), mig]), 80)
    first, _, continued = text.partition("continued")
    assert "3g.40gb" in first and "1g.10gb" in first
    # The continued table has temperature, power and link columns: an instance has none.
    assert "2/0" in first and "2/0" not in continued and "7/0" not in continued
