"""NVML read during the load, against the fake library: samples every interval, NVLink
unknown (not "no links") where the driver does not report it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

SCRIPT = """
import json, time
from gpu_audit.collect.diag_sampling import NvmlSampler
from gpu_audit.collect.nvml import read_nvml
from gpu_audit.collect.nvml.links import read_nvlinks
sampler = NvmlSampler([1], interval_s=0.2).start()
time.sleep(1.1)
samples = sampler.stop()
read_nvml(2.0)
print(json.dumps({"samples": samples, "links": read_nvlinks([0, 1])}))
"""


def test_sampler_reads_the_selected_gpu_every_interval(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1].update(sm_clock_mhz=1410, power_draw_w=512.5, temperature_c=77,
                               throttle_reasons_mask=0x4, ecc_errors_corrected_volatile=3)
    env = fake_nvml(scenario, base=cli_env)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = result["samples"]["1"]
    assert 4 <= len(rows) <= 8 and list(result["samples"]) == ["1"]
    assert rows[0]["t_s"] < rows[-1]["t_s"]
    assert {(r["sm_clock_mhz"], r["power_draw_w"], r["temperature_c"]) for r in rows} == \
        {(1410, 512.5, 77)}
    assert rows[0]["throttle_reasons"] == ["sw_power_cap"]
    assert rows[0]["ecc_errors_corrected_volatile"] == 3
    assert result["links"] == {"0": None, "1": None}
