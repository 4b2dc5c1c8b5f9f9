"""NVML's numbers, named: return codes, enumerations and field ids, as ``nvml.h`` defines them.

Named here so that the binding and the per-GPU reading read without ``pynvml`` at hand.
"""

from __future__ import annotations

LIBRARY_NAME = "libnvidia-ml.so.1"

# Return codes (nvmlReturn_t).
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25

# Clock-event ("throttle") reason bits, nvmlClocksEventReason*.
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
BRANDS = {
    0: "unknown",
    1: "quadro",
    2: "tesla",
    3: "nvs",
    4: "grid",
    5: "geforce",
    6: "titan",
    7: "nvidia_vapps",
    8: "nvidia_vpc",
    9: "nvidia_vcs",
    10: "nvidia_vws",
    11: "nvidia_cloud_gaming",
    12: "quadro_rtx",
    13: "nvidia_rtx",
    14: "nvidia",
    15: "geforce_rtx",
    16: "titan_rtx",
}
ARCHITECTURES = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
    13: "rubin",
}
PSTATE_UNKNOWN = 32
UNKNOWN_ARCHITECTURE = 0xFFFFFFFF
VALUE_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory when the driver cannot tell

# nvmlDeviceGetFieldValues ids: power and memory health, read in one call.
HEALTH_FIELDS = {
    1: "ecc_mode",  # NVML_FI_DEV_ECC_CURRENT
    2: "ecc_mode_pending",  # NVML_FI_DEV_ECC_PENDING: the mode after the next reset
    3: "ecc_errors_corrected_volatile",  # NVML_FI_DEV_ECC_SBE_VOL_TOTAL
    4: "ecc_errors_uncorrected_volatile",  # NVML_FI_DEV_ECC_DBE_VOL_TOTAL
    5: "ecc_errors_corrected_aggregate",  # NVML_FI_DEV_ECC_SBE_AGG_TOTAL
    6: "ecc_errors_uncorrected_aggregate",  # NVML_FI_DEV_ECC_DBE_AGG_TOTAL
    29: "retired_pages_sbe",  # NVML_FI_DEV_RETIRED_SBE
    30: "retired_pages_dbe",  # NVML_FI_DEV_RETIRED_DBE
    31: "retired_pages_pending",  # NVML_FI_DEV_RETIRED_PENDING
    142: "remapped_rows_correctable",  # NVML_FI_DEV_REMAPPED_COR
    143: "remapped_rows_uncorrectable",  # NVML_FI_DEV_REMAPPED_UNC
    144: "remapped_rows_pending",  # NVML_FI_DEV_REMAPPED_PENDING
    145: "remapped_rows_failure",  # NVML_FI_DEV_REMAPPED_FAILURE
}
BOOLEAN_FIELDS = frozenset(
    {"ecc_mode", "ecc_mode_pending", "retired_pages_pending", "remapped_rows_pending",
     "remapped_rows_failure"}
)
# Power in milliwatts. The 1-second average is what nvmlDeviceGetPowerUsage reports on Ampere and
# later; older GPUs have only the instant reading, which is what it reports there. Drivers older
# than these ids (r530) answer them as unsupported, and the dedicated calls fill in.
FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186
FI_POWER_MIN_LIMIT = 187  # the range the limit may be set in, as
FI_POWER_MAX_LIMIT = 188  # nvmlDeviceGetPowerManagementLimitConstraints
FI_POWER_DEFAULT_LIMIT = 189
FI_POWER_CURRENT_LIMIT = 190  # the limit in force, as nvmlDeviceGetEnforcedPowerLimit
POWER_FIELD_NAMES = {
    FI_POWER_AVERAGE: "power_draw_w",
    FI_POWER_INSTANT: "power_draw_w",
    FI_POWER_DEFAULT_LIMIT: "power_default_limit_w",
    FI_POWER_CURRENT_LIMIT: "power_limit_w",
    FI_POWER_MIN_LIMIT: "power_min_limit_w",
    FI_POWER_MAX_LIMIT: "power_max_limit_w",
}
# Readings only the field-values call gives (no dedicated call): None where it does not.
# The memory (HBM/GDDR) temperature: nvmlDeviceGetTemperature(V) knows the GPU sensor only.
FI_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP, in C
READING_FIELDS = {FI_MEMORY_TEMP: "memory_temperature_c"}
FIELD_VALUE_IDS = [*HEALTH_FIELDS, *POWER_FIELD_NAMES, *READING_FIELDS]
