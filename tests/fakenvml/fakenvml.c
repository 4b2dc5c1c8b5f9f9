/* A fake libnvidia-ml.so.1 for tests and benchmarks: the real pynvml loads it through the dynamic
 * loader (LD_LIBRARY_PATH) and every call answers from a scenario file.
 *
 * The scenario is a JSON file named by FAKE_NVML_SCENARIO, read on the first call. Its format is
 * documented in tests/fakegpu.py; in short:
 *
 *   {"driver_version": "550.54.15", "nvml_version": "12.550.54.15", "cuda_driver_version": 12040,
 *    "init_error": 0, "call_delay_ms": 0, "hang": [], "errors": {}, "missing_symbols": [],
 *    "gpus": [{"name": ..., "uuid": ..., <field>: <value> ..., "processes": [...],
 *              "lost": false, "unsupported": [], "hang": [], "errors": {}}]}
 *
 * A GPU field that is absent or null reads as NVML_ERROR_NOT_SUPPORTED, as does any call whose
 * group or function name is listed in the GPU's "unsupported". "hang" lists functions that never
 * return; "errors" maps function names to the NVML return code to answer; "missing_symbols" makes
 * the listed entry points answer NVML_ERROR_FUNCTION_NOT_FOUND (an older driver);
 * "unknown_field_ids" are field-value ids answered NVML_ERROR_INVALID_ARGUMENT (also an older
 * driver); a GPU's "unsupported_field_ids" are field-value ids answered NOT_SUPPORTED while the
 * dedicated calls still answer; "call_delay_ms" delays every call (a slow driver). Unknown keys
 * are refused.
 *
 * A scenario that cannot be read makes nvmlInit fail with NVML_ERROR_UNKNOWN and a message on
 * stderr, so a broken test fixture is never mistaken for a GPU. FAKE_NVML_CALL_LOG, when set, names
 * a file that gets one line per call (the function name), so tests can count what a client asked.
 *
 * Structure layouts follow nvidia-ml-py's ctypes definitions (pynvml.py), which follow nvml.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL
#define NVML_MEMORY_V2_VERSION ((unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24)))
#define NVML_TEMPERATURE_V1_VERSION ((unsigned)(sizeof(nvmlTemperature_v1_t) | (1u << 24)))
#define NVML_PROCESS_DETAIL_LIST_V1_VERSION                                                   \
    ((unsigned)(sizeof(nvmlProcessDetailList_v1_t) | (1u << 24)))

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct {
    unsigned int version, mode, numProcArrayEntries;
    nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
    unsigned int version;
    int sensorType;
    int temperature;
} nvmlTemperature_v1_t;

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

enum { VALUE_UINT = 1, VALUE_ULL = 3 };
enum { PROC_COMPUTE = 1, PROC_GRAPHICS = 2 };

typedef struct {
    unsigned int pid;
    int has_memory;
    unsigned long long memory;
    int kinds; /* PROC_COMPUTE | PROC_GRAPHICS */
    unsigned int sm_util;
    int has_instance; /* runs in a MIG instance: gpu_instance_id/compute_instance_id */
    unsigned int gpu_instance_id, compute_instance_id;
} fake_process;

typedef struct fake_gpu {
    unsigned int index;
    const jnode *json;
    int lost;
    size_t nproc;
    fake_process *procs;
    /* MIG: a physical GPU's instances ("mig_devices"), each a handle of its own whose json is
     * its "mig_devices" entry and whose processes are the parent's in that instance. */
    size_t nmig;
    struct fake_gpu *migs;
    struct fake_gpu *parent; /* set on a MIG device handle only */
    unsigned int gpu_instance_id, compute_instance_id;
} fake_gpu;

typedef fake_gpu *nvmlDevice_t;

static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static jnode *g_root;
static const char *g_load_error; /* set when the scenario could not be read */
static char g_error_text[512];
static fake_gpu *g_gpus;
static unsigned int g_ngpus;
static long g_delay_us;
static int g_refcount;
static FILE *g_call_log; /* FAKE_NVML_CALL_LOG: one line per call, for tests that count calls */

/* ---------------------------------------------------------------- scenario loading and checks */

static const char *const TOP_KEYS[] = {
    "driver_version", "nvml_version", "cuda_driver_version", "init_error", "call_delay_ms",
    "hang", "errors", "missing_symbols", "unknown_field_ids", "gpus", "description", NULL};

static const char *const GPU_KEYS[] = {
    "uuid", "name", "pci_bus_id", "pci_device_id", "pci_subsystem_id", "serial", "brand",
    "architecture", "compute_capability", "minor_number", "memory_total_bytes",
    "memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes", "bar1_total_bytes",
    "bar1_used_bytes", "utilization_pct", "memory_utilization_pct", "encoder_utilization_pct",
    "decoder_utilization_pct", "temperature_c", "temperature_slowdown_c", "temperature_shutdown_c",
    "temperature_max_operating_c", "fan_speed_pct", "power_draw_w", "power_limit_w",
    "power_default_limit_w", "graphics_clock_mhz", "sm_clock_mhz", "memory_clock_mhz",
    "graphics_clock_max_mhz", "sm_clock_max_mhz", "memory_clock_max_mhz", "performance_state",
    "throttle_reasons_mask", "persistence_mode", "compute_mode", "mig_mode", "ecc_mode",
    "ecc_mode_pending", "ecc_errors_corrected_volatile", "ecc_errors_uncorrected_volatile",
    "ecc_errors_corrected_aggregate", "ecc_errors_uncorrected_aggregate", "retired_pages_sbe",
    "retired_pages_dbe", "retired_pages_pending", "remapped_rows_correctable",
    "remapped_rows_uncorrectable", "remapped_rows_pending", "remapped_rows_failure",
    "pcie_gen_current", "pcie_gen_max", "pcie_gen_gpu_max", "pcie_width_current",
    "pcie_width_max", "pcie_tx_kbps", "pcie_rx_kbps", "display_active", "display_mode",
    "memory_temperature_c", "memory_temperature_max_c", "power_min_limit_w", "power_max_limit_w",
    "mig_mode_pending",
    "processes", "lost", "unsupported", "unsupported_field_ids", "hang", "errors",
    "mig_devices", "nvlinks", NULL};

static const char *const MIG_KEYS[] = {
    "uuid", "name", "gpu_instance_id", "compute_instance_id", "memory_total_bytes",
    "memory_used_bytes", "multiprocessor_count", "gpu_instance_slice_count",
    "compute_instance_slice_count", "shared_copy_engine_count", "shared_decoder_count",
    "shared_encoder_count", "shared_jpeg_count", "shared_ofa_count", "unsupported", "hang",
    "errors", NULL};

static const char *const NVLINK_KEYS[] = {"remote_type", "remote_pci_bus_id", NULL};

/* nvmlIntNvLinkDeviceType_t, by the names a scenario's links use. */
static const char *const NVLINK_REMOTE_TYPES[] = {"gpu", "ibmnpu", "switch", NULL};
#define NVML_NVLINK_DEVICE_TYPE_UNKNOWN 0xFF

static const char *const PROCESS_KEYS[] = {
    "pid", "used_memory_bytes", "type", "sm_util_pct", "gpu_instance_id", "compute_instance_id",
    NULL};

static int known_key(const char *const *keys, const char *key) {
    for (; *keys; keys++)
        if (strcmp(*keys, key) == 0) return 1;
    return 0;
}

static int check_keys(const jnode *object, const char *const *keys, const char *where) {
    for (size_t i = 0; i < object->length; i++) {
        if (!known_key(keys, object->keys[i])) {
            snprintf(g_error_text, sizeof g_error_text, "unknown key \"%s\" in %s",
                     object->keys[i], where);
            return 0;
        }
    }
    return 1;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static int load_processes(fake_gpu *gpu, const char *where) {
    const jnode *list = json_get(gpu->json, "processes");
    if (!list) return 1;
    if (list->type != J_ARRAY) {
        snprintf(g_error_text, sizeof g_error_text, "%s.processes must be a list", where);
        return 0;
    }
    gpu->procs = calloc(list->length ? list->length : 1, sizeof *gpu->procs);
    gpu->nproc = list->length;
    for (size_t i = 0; i < list->length; i++) {
        const jnode *p = list->items[i];
        char pwhere[96];
        snprintf(pwhere, sizeof pwhere, "%s.processes[%zu]", where, i);
        if (p->type != J_OBJECT) {
            snprintf(g_error_text, sizeof g_error_text, "%s must be an object", pwhere);
            return 0;
        }
        if (!check_keys(p, PROCESS_KEYS, pwhere)) return 0;
        long long pid, memory, sm = 0;
        if (!json_get_integer(p, "pid", &pid) || pid <= 0) {
            snprintf(g_error_text, sizeof g_error_text, "%s needs a positive integer pid", pwhere);
            return 0;
        }
        fake_process *fp = &gpu->procs[i];
        fp->pid = (unsigned int)pid;
        fp->has_memory = json_get_integer(p, "used_memory_bytes", &memory);
        fp->memory = fp->has_memory ? (unsigned long long)memory : 0;
        json_get_integer(p, "sm_util_pct", &sm);
        fp->sm_util = (unsigned int)sm;
        long long gi, ci;
        if (json_get_integer(p, "gpu_instance_id", &gi) && gi >= 0) {
            fp->has_instance = 1;
            fp->gpu_instance_id = (unsigned int)gi;
            fp->compute_instance_id =
                json_get_integer(p, "compute_instance_id", &ci) && ci >= 0 ? (unsigned int)ci : 0;
        }
        const char *type = json_get_string(p, "type");
        if (!type || strcmp(type, "compute") == 0) fp->kinds = PROC_COMPUTE;
        else if (strcmp(type, "graphics") == 0) fp->kinds = PROC_GRAPHICS;
        else if (strcmp(type, "compute+graphics") == 0) fp->kinds = PROC_COMPUTE | PROC_GRAPHICS;
        else {
            snprintf(g_error_text, sizeof g_error_text,
                     "%s.type must be compute, graphics or compute+graphics", pwhere);
            return 0;
        }
    }
    return 1;
}

/* A GPU's MIG devices: handles of their own, holding the parent's processes in their instance. */
static int load_mig_devices(fake_gpu *gpu, const char *where) {
    const jnode *list = json_get(gpu->json, "mig_devices");
    if (!list) return 1;
    if (list->type != J_ARRAY) {
        snprintf(g_error_text, sizeof g_error_text, "%s.mig_devices must be a list", where);
        return 0;
    }
    gpu->migs = calloc(list->length ? list->length : 1, sizeof *gpu->migs);
    gpu->nmig = list->length;
    for (size_t i = 0; i < list->length; i++) {
        const jnode *m = list->items[i];
        char mwhere[96];
        snprintf(mwhere, sizeof mwhere, "%s.mig_devices[%zu]", where, i);
        if (m->type != J_OBJECT) {
            snprintf(g_error_text, sizeof g_error_text, "%s must be an object", mwhere);
            return 0;
        }
        if (!check_keys(m, MIG_KEYS, mwhere)) return 0;
        long long gi, ci;
        if (!json_get_integer(m, "gpu_instance_id", &gi) || gi < 0 ||
            !json_get_integer(m, "compute_instance_id", &ci) || ci < 0) {
            snprintf(g_error_text, sizeof g_error_text,
                     "%s needs gpu_instance_id and compute_instance_id", mwhere);
            return 0;
        }
        fake_gpu *mig = &gpu->migs[i];
        mig->index = (unsigned int)i;
        mig->json = m;
        mig->lost = gpu->lost;
        mig->parent = gpu;
        mig->gpu_instance_id = (unsigned int)gi;
        mig->compute_instance_id = (unsigned int)ci;
        mig->procs = calloc(gpu->nproc ? gpu->nproc : 1, sizeof *mig->procs);
        for (size_t k = 0; k < gpu->nproc; k++) {
            const fake_process *p = &gpu->procs[k];
            if (p->has_instance && p->gpu_instance_id == mig->gpu_instance_id &&
                p->compute_instance_id == mig->compute_instance_id)
                mig->procs[mig->nproc++] = *p;
        }
    }
    return 1;
}

static int lookup_name(const char *const *names, const char *value, int *out);

/* A GPU's NVLinks: a list of {"remote_type", "remote_pci_bus_id"}, checked when loaded. */
static int load_nvlinks(const fake_gpu *gpu, const char *where) {
    const jnode *list = json_get(gpu->json, "nvlinks");
    if (!list) return 1;
    if (list->type != J_ARRAY) {
        snprintf(g_error_text, sizeof g_error_text, "%s.nvlinks must be a list", where);
        return 0;
    }
    for (size_t i = 0; i < list->length; i++) {
        const jnode *link = list->items[i];
        char lwhere[96];
        snprintf(lwhere, sizeof lwhere, "%s.nvlinks[%zu]", where, i);
        if (link->type != J_OBJECT) {
            snprintf(g_error_text, sizeof g_error_text, "%s must be an object", lwhere);
            return 0;
        }
        if (!check_keys(link, NVLINK_KEYS, lwhere)) return 0;
        const char *type = json_get_string(link, "remote_type");
        int value;
        if (type && !lookup_name(NVLINK_REMOTE_TYPES, type, &value) &&
            strcmp(type, "unknown") != 0) {
            snprintf(g_error_text, sizeof g_error_text,
                     "%s.remote_type must be gpu, ibmnpu, switch or unknown", lwhere);
            return 0;
        }
    }
    return 1;
}

static int load_scenario_tree(void) {
    if (g_root->type != J_OBJECT) {
        snprintf(g_error_text, sizeof g_error_text, "the document must be an object");
        return 0;
    }
    if (!check_keys(g_root, TOP_KEYS, "the scenario")) return 0;
    double delay_ms = 0;
    json_get_number(g_root, "call_delay_ms", &delay_ms);
    g_delay_us = (long)(delay_ms * 1000.0);
    const jnode *gpus = json_get(g_root, "gpus");
    if (gpus && gpus->type != J_ARRAY) {
        snprintf(g_error_text, sizeof g_error_text, "\"gpus\" must be a list");
        return 0;
    }
    g_ngpus = gpus ? (unsigned int)gpus->length : 0;
    g_gpus = calloc(g_ngpus ? g_ngpus : 1, sizeof *g_gpus);
    for (unsigned int i = 0; i < g_ngpus; i++) {
        char where[32];
        snprintf(where, sizeof where, "gpus[%u]", i);
        fake_gpu *gpu = &g_gpus[i];
        gpu->index = i;
        gpu->json = gpus->items[i];
        if (gpu->json->type != J_OBJECT) {
            snprintf(g_error_text, sizeof g_error_text, "%s must be an object", where);
            return 0;
        }
        if (!check_keys(gpu->json, GPU_KEYS, where)) return 0;
        json_get_bool(gpu->json, "lost", &gpu->lost);
        if (!load_processes(gpu, where)) return 0;
        if (!load_mig_devices(gpu, where)) return 0;
        if (!load_nvlinks(gpu, where)) return 0;
    }
    return 1;
}

static void load_scenario(void) {
    const char *log_path = getenv("FAKE_NVML_CALL_LOG");
    if (log_path && *log_path) g_call_log = fopen(log_path, "a");
    const char *path = getenv("FAKE_NVML_SCENARIO");
    if (!path || !*path) {
        g_load_error = "FAKE_NVML_SCENARIO is not set";
    } else {
        char *text = read_file(path);
        if (!text) {
            snprintf(g_error_text, sizeof g_error_text, "cannot read %s: %s", path,
                     strerror(errno));
            g_load_error = g_error_text;
        } else {
            char parse_error[256];
            g_root = json_parse(text, parse_error, sizeof parse_error);
            free(text);
            if (!g_root) {
                snprintf(g_error_text, sizeof g_error_text, "%s: %s", path, parse_error);
                g_load_error = g_error_text;
            } else if (!load_scenario_tree()) {
                g_load_error = g_error_text;
            }
        }
    }
    if (g_load_error) fprintf(stderr, "fakenvml: bad scenario: %s\n", g_load_error);
}

/* ------------------------------------------------------------------------------ call prologue */

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void hang_forever(void) {
    for (;;) sleep(3600);
}

/* Every entry point starts here: load, delay, injected hangs and missing symbols. */
static nvmlReturn_t enter_call(const char *fn, int needs_init) {
    pthread_once(&g_load_once, load_scenario);
    if (g_call_log) {
        pthread_mutex_lock(&g_lock);
        fprintf(g_call_log, "%s\n", fn);
        fflush(g_call_log);
        pthread_mutex_unlock(&g_lock);
    }
    if (g_delay_us > 0) sleep_us(g_delay_us);
    if (g_root) {
        if (json_list_contains(g_root, "hang", fn)) hang_forever();
        if (json_list_contains(g_root, "missing_symbols", fn)) return NVML_ERROR_FUNCTION_NOT_FOUND;
        long long code;
        if (json_get_integer(json_get(g_root, "errors"), fn, &code)) return (nvmlReturn_t)code;
    }
    if (needs_init) {
        pthread_mutex_lock(&g_lock);
        int initialised = g_refcount > 0;
        pthread_mutex_unlock(&g_lock);
        if (!initialised) return NVML_ERROR_UNINITIALIZED;
    }
    return NVML_SUCCESS;
}

static fake_gpu *gpu_of(nvmlDevice_t device) {
    if (!device) return NULL;
    if (device >= g_gpus && device < g_gpus + g_ngpus) {
        if ((size_t)((char *)device - (char *)g_gpus) % sizeof(fake_gpu) != 0) return NULL;
        return device;
    }
    for (unsigned int i = 0; i < g_ngpus; i++) { /* a MIG device handle */
        fake_gpu *migs = g_gpus[i].migs;
        if (migs && device >= migs && device < migs + g_gpus[i].nmig &&
            (size_t)((char *)device - (char *)migs) % sizeof(fake_gpu) == 0)
            return device;
    }
    return NULL;
}

/* Prologue for per-device calls; group is the name a scenario lists under "unsupported". */
static nvmlReturn_t enter_device(const char *fn, const char *group, nvmlDevice_t device,
                                 fake_gpu **out) {
    nvmlReturn_t ret = enter_call(fn, 1);
    if (ret != NVML_SUCCESS) return ret;
    fake_gpu *gpu = gpu_of(device);
    if (!gpu) return NVML_ERROR_INVALID_ARGUMENT;
    if (json_list_contains(gpu->json, "hang", fn)) hang_forever();
    long long code;
    if (json_get_integer(json_get(gpu->json, "errors"), fn, &code)) return (nvmlReturn_t)code;
    if (gpu->lost) return NVML_ERROR_GPU_IS_LOST;
    if (group && json_list_contains(gpu->json, "unsupported", group))
        return NVML_ERROR_NOT_SUPPORTED;
    if (json_list_contains(gpu->json, "unsupported", fn)) return NVML_ERROR_NOT_SUPPORTED;
    *out = gpu;
    return NVML_SUCCESS;
}

/* Entry points shared by several exported names take the name they were called by. */
#define ENTER_AS(name, needs_init)                                                            \
    do {                                                                                      \
        nvmlReturn_t entered_ = enter_call(name, needs_init);                                 \
        if (entered_ != NVML_SUCCESS) return entered_;                                        \
    } while (0)

#define ENTER_DEVICE_AS(name, group)                                                          \
    fake_gpu *gpu = NULL;                                                                     \
    do {                                                                                      \
        nvmlReturn_t entered_ = enter_device(name, group, device, &gpu);                      \
        if (entered_ != NVML_SUCCESS) return entered_;                                        \
    } while (0)

#define ENTER(needs_init) ENTER_AS(__func__, needs_init)
#define ENTER_DEVICE(group) ENTER_DEVICE_AS(__func__, group)

/* ------------------------------------------------------------------------------ field helpers */

static int get_uint(const fake_gpu *gpu, const char *key, unsigned int *out) {
    long long v;
    if (!json_get_integer(gpu->json, key, &v) || v < 0) return 0;
    *out = (unsigned int)v;
    return 1;
}

static int get_ull(const fake_gpu *gpu, const char *key, unsigned long long *out) {
    long long v;
    if (!json_get_integer(gpu->json, key, &v) || v < 0) return 0;
    *out = (unsigned long long)v;
    return 1;
}

static int get_flag(const fake_gpu *gpu, const char *key, unsigned int *out) {
    int b;
    if (!json_get_bool(gpu->json, key, &b)) return 0;
    *out = b ? 1u : 0u;
    return 1;
}

/* Watts in the scenario, milliwatts in NVML. */
static int get_milliwatts(const fake_gpu *gpu, const char *key, unsigned int *out) {
    double w;
    if (!json_get_number(gpu->json, key, &w) || w < 0) return 0;
    *out = (unsigned int)(w * 1000.0 + 0.5);
    return 1;
}

static nvmlReturn_t copy_string(const char *value, char *buf, unsigned int length) {
    if (!value) return NVML_ERROR_NOT_SUPPORTED;
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(value);
    if (n + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, value, n + 1);
    return NVML_SUCCESS;
}

static int lookup_name(const char *const *names, const char *value, int *out) {
    for (int i = 0; names[i]; i++) {
        if (names[i][0] && strcmp(names[i], value) == 0) {
            *out = i;
            return 1;
        }
    }
    return 0;
}

/* Indexed by the NVML enum value; "" marks a value with no name. */
static const char *const BRANDS[] = {
    "unknown", "quadro", "tesla", "nvs", "grid", "geforce", "titan", "nvidia_vapps", "nvidia_vpc",
    "nvidia_vcs", "nvidia_vws", "nvidia_cloud_gaming", "quadro_rtx", "nvidia_rtx", "nvidia",
    "geforce_rtx", "titan_rtx", NULL};
static const char *const ARCHITECTURES[] = {
    "", "", "kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper",
    "blackwell", NULL};
static const char *const COMPUTE_MODES[] = {
    "default", "exclusive_thread", "prohibited", "exclusive_process", NULL};

/* Memory as NVML reports it. v1 "used" includes the driver's reservation; v2 splits it out. */
static void memory_of(const fake_gpu *gpu, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    *reserved = 0;
    get_ull(gpu, "memory_reserved_bytes", reserved);
    if (!get_ull(gpu, "memory_used_bytes", used)) {
        *used = 0;
        for (size_t i = 0; i < gpu->nproc; i++)
            if (gpu->procs[i].has_memory) *used += gpu->procs[i].memory;
    }
    if (*reserved + *used > *total) *used = *total - *reserved;
}

/* ----------------------------------------------------------------------------- system calls */

static nvmlReturn_t init_as(const char *name) {
    ENTER_AS(name, 0);
    if (g_load_error) return NVML_ERROR_UNKNOWN;
    long long code = 0;
    if (json_get_integer(g_root, "init_error", &code) && code != 0) return (nvmlReturn_t)code;
    pthread_mutex_lock(&g_lock);
    g_refcount++;
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return init_as(__func__);
}
EXPORT nvmlReturn_t nvmlInit_v2(void) { return init_as(__func__); }
EXPORT nvmlReturn_t nvmlInit(void) { return init_as(__func__); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    ENTER(1);
    pthread_mutex_lock(&g_lock);
    if (g_refcount > 0) g_refcount--;
    pthread_mutex_unlock(&g_lock);
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER(1);
    return copy_string(json_get_string(g_root, "driver_version"), version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER(1);
    return copy_string(json_get_string(g_root, "nvml_version"), version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    ENTER(1);
    long long v;
    if (!json_get_integer(g_root, "cuda_driver_version", &v)) return NVML_ERROR_NOT_SUPPORTED;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    *version = (int)v;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    ENTER(1);
    long long v;
    if (!json_get_integer(g_root, "cuda_driver_version", &v)) return NVML_ERROR_NOT_SUPPORTED;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    *version = (int)v;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    ENTER(1);
    char path[64], comm[256];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f) return NVML_ERROR_NOT_FOUND;
    size_t n = fread(comm, 1, sizeof comm - 1, f);
    fclose(f);
    while (n > 0 && comm[n - 1] == '\n') n--;
    comm[n] = '\0';
    return copy_string(comm, name, length);
}

static nvmlReturn_t count_as(const char *name, unsigned int *count) {
    ENTER_AS(name, 1);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = g_ngpus;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { return count_as(__func__, count); }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return count_as(__func__, count); }

static nvmlReturn_t handle_by_index_as(const char *name, unsigned int index,
                                       nvmlDevice_t *device) {
    ENTER_AS(name, 1);
    if (!device || index >= g_ngpus) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_gpus[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index_as(__func__, index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index_as(__func__, index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    ENTER(1);
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < g_ngpus; i++) {
        const char *u = json_get_string(g_gpus[i].json, "uuid");
        if (u && strcmp(u, uuid) == 0) {
            *device = &g_gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

static nvmlReturn_t handle_by_bus_id_as(const char *name, const char *bus_id,
                                        nvmlDevice_t *device) {
    ENTER_AS(name, 1);
    if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < g_ngpus; i++) {
        const char *b = json_get_string(g_gpus[i].json, "pci_bus_id");
        /* Accept the short "0000:18:00.0" form as well as the full "00000000:18:00.0". */
        if (b && (strcasecmp(b, bus_id) == 0 ||
                  (strlen(b) == strlen(bus_id) + 4 && strcasecmp(b + 4, bus_id) == 0))) {
            *device = &g_gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
    return handle_by_bus_id_as(__func__, bus_id, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
    return handle_by_bus_id_as(__func__, bus_id, device);
}

/* ---------------------------------------------------------------------------- identity calls */

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    ENTER_DEVICE(NULL);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = gpu->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    ENTER_DEVICE(NULL);
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (!get_uint(gpu, "minor_number", minor)) *minor = gpu->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER_DEVICE("uuid");
    return copy_string(json_get_string(gpu->json, "uuid"), uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER_DEVICE("name");
    return copy_string(json_get_string(gpu->json, "name"), name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    ENTER_DEVICE("serial");
    return copy_string(json_get_string(gpu->json, "serial"), serial, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, int *brand) {
    ENTER_DEVICE("brand");
    const char *name = json_get_string(gpu->json, "brand");
    int value;
    if (!name || !lookup_name(BRANDS, name, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!brand) return NVML_ERROR_INVALID_ARGUMENT;
    *brand = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch) {
    ENTER_DEVICE("architecture");
    const char *name = json_get_string(gpu->json, "architecture");
    int value;
    if (!name || !lookup_name(ARCHITECTURES, name, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = (unsigned int)value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                       int *minor) {
    ENTER_DEVICE("compute_capability");
    const char *cc = json_get_string(gpu->json, "compute_capability");
    int ma, mi;
    if (!cc || sscanf(cc, "%d.%d", &ma, &mi) != 2) return NVML_ERROR_NOT_SUPPORTED;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = ma;
    *minor = mi;
    return NVML_SUCCESS;
}

/* Clears pci and fills what a bus id ("00000000:18:00.0") says. */
static void fill_pci_bus_id(nvmlPciInfo_t *pci, const char *bus_id) {
    memset(pci, 0, sizeof *pci);
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", domain & 0xFFFF, bus,
             dev, fn);
}

static nvmlReturn_t pci_info_as(const char *name, nvmlDevice_t device, nvmlPciInfo_t *pci) {
    ENTER_DEVICE_AS(name, "pci");
    const char *bus_id = json_get_string(gpu->json, "pci_bus_id");
    if (!bus_id) return NVML_ERROR_NOT_SUPPORTED;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci_bus_id(pci, bus_id);
    get_uint(gpu, "pci_device_id", &pci->pciDeviceId);
    get_uint(gpu, "pci_subsystem_id", &pci->pciSubSystemId);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info_as(__func__, device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info_as(__func__, device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return pci_info_as(__func__, device, pci);
}

/* ------------------------------------------------------------------------------ memory calls */

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    ENTER_DEVICE("memory");
    unsigned long long total, reserved, used;
    if (!get_ull(gpu, "memory_total_bytes", &total)) return NVML_ERROR_NOT_SUPPORTED;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory_of(gpu, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    ENTER_DEVICE("memory");
    unsigned long long total, reserved, used;
    if (!get_ull(gpu, "memory_total_bytes", &total)) return NVML_ERROR_NOT_SUPPORTED;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != NVML_MEMORY_V2_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory_of(gpu, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1) {
    ENTER_DEVICE("bar1");
    unsigned long long total, used = 0;
    if (!get_ull(gpu, "bar1_total_bytes", &total)) return NVML_ERROR_NOT_SUPPORTED;
    if (!bar1) return NVML_ERROR_INVALID_ARGUMENT;
    get_ull(gpu, "bar1_used_bytes", &used);
    bar1->bar1Total = total;
    bar1->bar1Used = used;
    bar1->bar1Free = total > used ? total - used : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *info) {
    (void)info;
    ENTER_DEVICE("confidential_compute");
    (void)gpu;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------- utilisation and sensors */

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    ENTER_DEVICE("utilization");
    unsigned int g, m;
    if (!get_uint(gpu, "utilization_pct", &g) || !get_uint(gpu, "memory_utilization_pct", &m))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    util->gpu = g;
    util->memory = m;
    return NVML_SUCCESS;
}

static nvmlReturn_t codec_utilization(fake_gpu *gpu, const char *key, unsigned int *util,
                                      unsigned int *period) {
    unsigned int value;
    if (!get_uint(gpu, key, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!util || !period) return NVML_ERROR_INVALID_ARGUMENT;
    *util = value;
    *period = 167000;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *util,
                                                    unsigned int *period_us) {
    ENTER_DEVICE("encoder");
    return codec_utilization(gpu, "encoder_utilization_pct", util, period_us);
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *util,
                                                    unsigned int *period_us) {
    ENTER_DEVICE("decoder");
    return codec_utilization(gpu, "decoder_utilization_pct", util, period_us);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    ENTER_DEVICE("temperature");
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int value;
    if (!get_uint(gpu, "temperature_c", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!temp) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t *temp) {
    ENTER_DEVICE("temperature");
    if (!temp) return NVML_ERROR_INVALID_ARGUMENT;
    if (temp->version != NVML_TEMPERATURE_V1_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temp->sensorType != 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int value;
    if (!get_uint(gpu, "temperature_c", &value)) return NVML_ERROR_NOT_SUPPORTED;
    temp->temperature = (int)value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold,
                                                      unsigned int *temp) {
    ENTER_DEVICE("temperature_thresholds");
    const char *key = threshold == 0   ? "temperature_shutdown_c"
                      : threshold == 1 ? "temperature_slowdown_c"
                      : threshold == 2 ? "memory_temperature_max_c"
                      : threshold == 3 ? "temperature_max_operating_c"
                                       : NULL;
    unsigned int value;
    if (!key || !get_uint(gpu, key, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!temp) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = value;
    return NVML_SUCCESS;
}

static nvmlReturn_t fan_speed_as(const char *name, nvmlDevice_t device, unsigned int fan,
                                 unsigned int *speed) {
    ENTER_DEVICE_AS(name, "fan");
    if (fan != 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int value;
    if (!get_uint(gpu, "fan_speed_pct", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!speed) return NVML_ERROR_INVALID_ARGUMENT;
    *speed = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    return fan_speed_as(__func__, device, 0, speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan,
                                             unsigned int *speed) {
    return fan_speed_as(__func__, device, fan, speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *count) {
    ENTER_DEVICE("fan");
    unsigned int value;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = get_uint(gpu, "fan_speed_pct", &value) ? 1 : 0;
    return NVML_SUCCESS;
}

/* --------------------------------------------------------------------------- power and clocks */

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *milliwatts) {
    ENTER_DEVICE("power");
    unsigned int value;
    if (!get_milliwatts(gpu, "power_draw_w", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!milliwatts) return NVML_ERROR_INVALID_ARGUMENT;
    *milliwatts = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    ENTER_DEVICE("power_limit");
    unsigned int value;
    if (!get_milliwatts(gpu, "power_limit_w", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) {
    ENTER_DEVICE("power_limit");
    unsigned int value;
    if (!get_milliwatts(gpu, "power_limit_w", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                             unsigned int *limit) {
    ENTER_DEVICE("power_default_limit");
    unsigned int value;
    if (!get_milliwatts(gpu, "power_default_limit_w", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!limit) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                 unsigned int *min_limit,
                                                                 unsigned int *max_limit) {
    ENTER_DEVICE("power_limit");
    unsigned int low, high;
    if (!get_milliwatts(gpu, "power_min_limit_w", &low) ||
        !get_milliwatts(gpu, "power_max_limit_w", &high))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!min_limit || !max_limit) return NVML_ERROR_INVALID_ARGUMENT;
    *min_limit = low;
    *max_limit = high;
    return NVML_SUCCESS;
}

static const char *clock_key(int type, int max) {
    switch (type) {
    case 0: return max ? "graphics_clock_max_mhz" : "graphics_clock_mhz";
    case 1: return max ? "sm_clock_max_mhz" : "sm_clock_mhz";
    case 2: return max ? "memory_clock_max_mhz" : "memory_clock_mhz";
    default: return NULL;
    }
}

static nvmlReturn_t read_clock(fake_gpu *gpu, int type, int max, unsigned int *mhz) {
    const char *key = clock_key(type, max);
    if (!key) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int value;
    /* The graphics clock follows the SM clock unless a scenario sets it. */
    if (!get_uint(gpu, key, &value) && !(type == 0 && get_uint(gpu, clock_key(1, max), &value)))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!mhz) return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *mhz) {
    ENTER_DEVICE("clocks");
    return read_clock(gpu, type, 0, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *mhz) {
    ENTER_DEVICE("max_clocks");
    return read_clock(gpu, type, 1, mhz);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pstate) {
    ENTER_DEVICE("performance_state");
    unsigned int value;
    if (!get_uint(gpu, "performance_state", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!pstate) return NVML_ERROR_INVALID_ARGUMENT;
    *pstate = (int)value;
    return NVML_SUCCESS;
}

static nvmlReturn_t clock_reasons_as(const char *name, nvmlDevice_t device,
                                     unsigned long long *reasons) {
    ENTER_DEVICE_AS(name, "throttle_reasons");
    unsigned long long value;
    if (!get_ull(gpu, "throttle_reasons_mask", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!reasons) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                           unsigned long long *reasons) {
    return clock_reasons_as(__func__, device, reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                              unsigned long long *reasons) {
    return clock_reasons_as(__func__, device, reasons);
}

/* --------------------------------------------------------------------------------- modes */

static nvmlReturn_t read_flag(fake_gpu *gpu, const char *key, unsigned int *out) {
    unsigned int value;
    if (!get_flag(gpu, key, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int *mode) {
    ENTER_DEVICE("persistence");
    return read_flag(gpu, "persistence_mode", mode);
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, unsigned int *active) {
    ENTER_DEVICE("display");
    return read_flag(gpu, "display_active", active);
}

EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, unsigned int *mode) {
    ENTER_DEVICE("display");
    /* A display attached implies the display mode is enabled. */
    if (read_flag(gpu, "display_mode", mode) == NVML_SUCCESS) return NVML_SUCCESS;
    return read_flag(gpu, "display_active", mode);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *mode) {
    ENTER_DEVICE("compute_mode");
    const char *name = json_get_string(gpu->json, "compute_mode");
    int value;
    if (!name || !lookup_name(COMPUTE_MODES, name, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                         unsigned int *pending) {
    ENTER_DEVICE("mig");
    unsigned int value;
    if (!get_flag(gpu, "mig_mode", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = value;
    get_flag(gpu, "mig_mode_pending", pending); /* a change waiting for a GPU reset */
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    ENTER_DEVICE(NULL);
    if (!is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = gpu->parent != NULL;
    return NVML_SUCCESS;
}

/* The most MIG devices a GPU can hold (7 on the GPUs that have MIG, more if the scenario lists
 * more), 0 with MIG disabled; indices past the instances that exist answer NOT_FOUND. */
enum { FAKE_MAX_MIG_DEVICES = 7 };

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    ENTER_DEVICE("mig");
    if (gpu->parent) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int mig;
    if (!get_flag(gpu, "mig_mode", &mig)) return NVML_ERROR_NOT_SUPPORTED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = !mig ? 0 : gpu->nmig > FAKE_MAX_MIG_DEVICES ? (unsigned int)gpu->nmig
                                                         : FAKE_MAX_MIG_DEVICES;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t *mig) {
    ENTER_DEVICE("mig");
    if (gpu->parent || !mig) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int enabled;
    if (!get_flag(gpu, "mig_mode", &enabled)) return NVML_ERROR_NOT_SUPPORTED;
    if (!enabled) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= gpu->nmig) return NVML_ERROR_NOT_FOUND;
    *mig = &gpu->migs[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device,
                                                                 nvmlDevice_t *parent) {
    ENTER_DEVICE(NULL);
    if (!gpu->parent || !parent) return NVML_ERROR_INVALID_ARGUMENT; /* not a MIG handle */
    *parent = gpu->parent;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER_DEVICE(NULL);
    if (!gpu->parent) return NVML_ERROR_NOT_SUPPORTED;
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    *id = gpu->gpu_instance_id;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER_DEVICE(NULL);
    if (!gpu->parent) return NVML_ERROR_NOT_SUPPORTED;
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    *id = gpu->compute_instance_id;
    return NVML_SUCCESS;
}

typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount,
        computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* Engine counts and slices of a MIG device; NVML answers these for MIG device handles only. */
static nvmlReturn_t attributes_as(const char *name, nvmlDevice_t device,
                                  nvmlDeviceAttributes_t *attributes) {
    ENTER_DEVICE_AS(name, "mig");
    if (!gpu->parent) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long memory;
    unsigned int sms;
    if (!get_uint(gpu, "multiprocessor_count", &sms) ||
        !get_ull(gpu, "memory_total_bytes", &memory))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!attributes) return NVML_ERROR_INVALID_ARGUMENT;
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = sms;
    get_uint(gpu, "shared_copy_engine_count", &attributes->sharedCopyEngineCount);
    get_uint(gpu, "shared_decoder_count", &attributes->sharedDecoderCount);
    get_uint(gpu, "shared_encoder_count", &attributes->sharedEncoderCount);
    get_uint(gpu, "shared_jpeg_count", &attributes->sharedJpegCount);
    get_uint(gpu, "shared_ofa_count", &attributes->sharedOfaCount);
    attributes->gpuInstanceSliceCount = 1;
    get_uint(gpu, "gpu_instance_slice_count", &attributes->gpuInstanceSliceCount);
    attributes->computeInstanceSliceCount = attributes->gpuInstanceSliceCount;
    get_uint(gpu, "compute_instance_slice_count", &attributes->computeInstanceSliceCount);
    attributes->memorySizeMB = memory / (1024ULL * 1024ULL);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                               nvmlDeviceAttributes_t *attributes) {
    return attributes_as(__func__, device, attributes);
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device,
                                            nvmlDeviceAttributes_t *attributes) {
    return attributes_as(__func__, device, attributes);
}

static nvmlReturn_t driver_model_as(const char *name, nvmlDevice_t device) {
    ENTER_DEVICE_AS(name, NULL);
    (void)gpu;
    return NVML_ERROR_NOT_SUPPORTED; /* a Windows notion */
}

EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, int *current, int *pending) {
    (void)current;
    (void)pending;
    return driver_model_as(__func__, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, int *current, int *pending) {
    (void)current;
    (void)pending;
    return driver_model_as(__func__, device);
}

/* ------------------------------------------------------------------------ ECC and memory health */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, unsigned int *current,
                                         unsigned int *pending) {
    ENTER_DEVICE("ecc");
    unsigned int value, pending_value;
    if (!get_flag(gpu, "ecc_mode", &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!get_flag(gpu, "ecc_mode_pending", &pending_value)) pending_value = value;
    *current = value;
    *pending = pending_value;
    return NVML_SUCCESS;
}

static const char *ecc_key(int error_type, int counter_type) {
    if (error_type == 0) return counter_type == 0 ? "ecc_errors_corrected_volatile"
                                                  : "ecc_errors_corrected_aggregate";
    return counter_type == 0 ? "ecc_errors_uncorrected_volatile"
                             : "ecc_errors_uncorrected_aggregate";
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type,
                                                int counter_type, unsigned long long *count) {
    ENTER_DEVICE("ecc");
    if (error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int enabled;
    unsigned long long value;
    if (!get_flag(gpu, "ecc_mode", &enabled) ||
        !get_ull(gpu, ecc_key(error_type, counter_type), &value))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *count,
                                              unsigned long long *addresses) {
    ENTER_DEVICE("retired_pages");
    unsigned int pages;
    if (!get_uint(gpu, cause == 0 ? "retired_pages_sbe" : "retired_pages_dbe", &pages))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!count || cause < 0 || cause > 1) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < pages || (!addresses && pages > 0)) {
        *count = pages;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < pages; i++)
        addresses[i] = 0x100000ULL * (gpu->index + 1ULL) + 0x1000ULL * i + (unsigned)cause;
    *count = pages;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                           unsigned int *pending) {
    ENTER_DEVICE("retired_pages");
    return read_flag(gpu, "retired_pages_pending", pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *correctable,
                                              unsigned int *uncorrectable, unsigned int *pending,
                                              unsigned int *failure) {
    ENTER_DEVICE("remapped_rows");
    unsigned int c, u, p = 0, f = 0;
    if (!get_uint(gpu, "remapped_rows_correctable", &c) ||
        !get_uint(gpu, "remapped_rows_uncorrectable", &u))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!correctable || !uncorrectable || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    get_flag(gpu, "remapped_rows_pending", &p);
    get_flag(gpu, "remapped_rows_failure", &f);
    *correctable = c;
    *uncorrectable = u;
    *pending = p;
    *failure = f;
    return NVML_SUCCESS;
}

/* Field values: the memory-health fields, answered like the dedicated calls above. */
static void field_value(fake_gpu *gpu, nvmlFieldValue_t *v) {
    const char *group = NULL, *key = NULL;
    int type = VALUE_ULL, flag = 0;
    switch (v->fieldId) {
    case 1: group = "ecc"; key = "ecc_mode"; flag = 1; break;
    case 2: group = "ecc"; key = "ecc_mode_pending"; flag = 1; break;
    case 3: group = "ecc"; key = "ecc_errors_corrected_volatile"; break;
    case 4: group = "ecc"; key = "ecc_errors_uncorrected_volatile"; break;
    case 5: group = "ecc"; key = "ecc_errors_corrected_aggregate"; break;
    case 6: group = "ecc"; key = "ecc_errors_uncorrected_aggregate"; break;
    case 29: group = "retired_pages"; key = "retired_pages_sbe"; break;
    case 30: group = "retired_pages"; key = "retired_pages_dbe"; break;
    case 31: group = "retired_pages"; key = "retired_pages_pending"; flag = 1; break;
    case 142: group = "remapped_rows"; key = "remapped_rows_correctable"; break;
    case 143: group = "remapped_rows"; key = "remapped_rows_uncorrectable"; break;
    case 144: group = "remapped_rows"; key = "remapped_rows_pending"; flag = 1; break;
    case 145: group = "remapped_rows"; key = "remapped_rows_failure"; flag = 1; break;
    case 185: /* NVML_FI_DEV_POWER_AVERAGE */
    case 186: /* NVML_FI_DEV_POWER_INSTANT */
        group = "power"; key = "power_draw_w"; type = VALUE_UINT; break;
    case 189:
        group = "power_default_limit"; key = "power_default_limit_w"; type = VALUE_UINT; break;
    case 187: group = "power_limit"; key = "power_min_limit_w"; type = VALUE_UINT; break;
    case 188: group = "power_limit"; key = "power_max_limit_w"; type = VALUE_UINT; break;
    case 190: group = "power_limit"; key = "power_limit_w"; type = VALUE_UINT; break;
    case 82: group = "temperature"; key = "memory_temperature_c"; break; /* MEMORY_TEMP, C */
    default: break;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    v->timestamp = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    v->latencyUsec = 0;
    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (json_list_contains_integer(g_root, "unknown_field_ids", v->fieldId)) {
        v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; /* a driver older than this field id */
        return;
    }
    if (!key || json_list_contains(gpu->json, "unsupported", group)) return;
    /* A field the driver answers NOT_SUPPORTED while its dedicated call still works. */
    if (json_list_contains_integer(gpu->json, "unsupported_field_ids", v->fieldId)) return;
    if (v->fieldId == 2 && !json_get(gpu->json, key)) key = "ecc_mode";
    unsigned int enabled;
    /* Error counters exist only while ECC is on, as with nvmlDeviceGetTotalEccErrors. */
    if (v->fieldId >= 3 && v->fieldId <= 6 && !get_flag(gpu, "ecc_mode", &enabled)) return;
    if (v->fieldId == 82) { /* a temperature, whole degrees */
        unsigned int celsius;
        if (!get_uint(gpu, key, &celsius)) return;
        v->valueType = VALUE_UINT;
        v->value.uiVal = celsius;
    } else if (type == VALUE_UINT && !flag) { /* power, in milliwatts */
        unsigned int milliwatts;
        if (!get_milliwatts(gpu, key, &milliwatts)) return;
        v->valueType = VALUE_UINT;
        v->value.uiVal = milliwatts;
    } else if (flag) {
        unsigned int value;
        if (!get_flag(gpu, key, &value)) return;
        v->valueType = VALUE_UINT;
        v->value.uiVal = value;
    } else {
        unsigned long long value;
        if (!get_ull(gpu, key, &value)) return;
        v->valueType = type;
        v->value.ullVal = value;
    }
    v->nvmlReturn = NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                             nvmlFieldValue_t *values) {
    ENTER_DEVICE(NULL);
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) field_value(gpu, &values[i]);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------- PCIe */

static nvmlReturn_t read_uint(fake_gpu *gpu, const char *key, unsigned int *out) {
    unsigned int value;
    if (!get_uint(gpu, key, &value)) return NVML_ERROR_NOT_SUPPORTED;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen) {
    ENTER_DEVICE("pcie");
    return read_uint(gpu, "pcie_gen_current", gen);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen) {
    ENTER_DEVICE("pcie");
    return read_uint(gpu, "pcie_gen_max", gen);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen) {
    ENTER_DEVICE("pcie");
    if (read_uint(gpu, "pcie_gen_gpu_max", gen) == NVML_SUCCESS) return NVML_SUCCESS;
    return read_uint(gpu, "pcie_gen_max", gen);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width) {
    ENTER_DEVICE("pcie");
    return read_uint(gpu, "pcie_width_current", width);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *width) {
    ENTER_DEVICE("pcie");
    return read_uint(gpu, "pcie_width_max", width);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter,
                                                unsigned int *kbps) {
    ENTER_DEVICE("pcie");
    if (counter != 0 && counter != 1) return NVML_ERROR_INVALID_ARGUMENT;
    return read_uint(gpu, counter == 0 ? "pcie_tx_kbps" : "pcie_rx_kbps", kbps);
}

/* ------------------------------------------------------------------------- NVLink and fabric */

/* PyTorch resolves these at its first CUDA allocation (c10/cuda/driver_api.h) and asserts when
 * one is missing. A GPU whose scenario declares no "nvlinks" has no NVLink: NOT_SUPPORTED, as
 * nvml.h says; a link past those declared is an invalid argument. */
static nvmlReturn_t nvlink_of(fake_gpu *gpu, unsigned int link, const void *out,
                              const jnode **found) {
    const jnode *links = json_get(gpu->json, "nvlinks");
    if (!links || links->type != J_ARRAY) return NVML_ERROR_NOT_SUPPORTED;
    if (!out || link >= links->length) return NVML_ERROR_INVALID_ARGUMENT;
    *found = links->items[link];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                        int *type) {
    ENTER_DEVICE("nvlink");
    const jnode *found = NULL;
    nvmlReturn_t ret = nvlink_of(gpu, link, type, &found);
    if (ret != NVML_SUCCESS) return ret;
    const char *name = json_get_string(found, "remote_type");
    if (!name || !lookup_name(NVLINK_REMOTE_TYPES, name, type))
        *type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                        nvmlPciInfo_t *pci) {
    ENTER_DEVICE("nvlink");
    const jnode *found = NULL;
    nvmlReturn_t ret = nvlink_of(gpu, link, pci, &found);
    if (ret != NVML_SUCCESS) return ret;
    const char *bus_id = json_get_string(found, "remote_pci_bus_id");
    if (!bus_id) return NVML_ERROR_NOT_SUPPORTED;
    fill_pci_bus_id(pci, bus_id);
    return NVML_SUCCESS;
}

/* No scenario puts a GPU in an NVLink fabric (NVSwitch domain): NOT_SUPPORTED, as nvml.h
 * answers for a device that does not support the GPU fabric. The structure is left untouched. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info) {
    ENTER_DEVICE("nvlink");
    (void)gpu;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------------------------- processes */

/* Copies the processes of one kind; rows are written by fill(row, process, out, i). */
typedef void (*fill_fn)(const fake_process *p, void *out, unsigned int i);

static nvmlReturn_t list_processes(fake_gpu *gpu, int kind, unsigned int *count, void *out,
                                   fill_fn fill) {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = 0;
    for (size_t i = 0; i < gpu->nproc; i++)
        if (gpu->procs[i].kinds & kind) n++;
    if (n == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if (!out || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int row = 0;
    for (size_t i = 0; i < gpu->nproc; i++)
        if (gpu->procs[i].kinds & kind) fill(&gpu->procs[i], out, row++);
    *count = n;
    return NVML_SUCCESS;
}

static unsigned long long memory_or_na(const fake_process *p) {
    return p->has_memory ? p->memory : NVML_VALUE_NOT_AVAILABLE_ULL;
}

static void fill_v1(const fake_process *p, void *out, unsigned int i) {
    nvmlProcessInfo_v1_t *row = (nvmlProcessInfo_v1_t *)out + i;
    row->pid = p->pid;
    row->usedGpuMemory = memory_or_na(p);
}

static void fill_v2(const fake_process *p, void *out, unsigned int i) {
    nvmlProcessInfo_v2_t *row = (nvmlProcessInfo_v2_t *)out + i;
    row->pid = p->pid;
    row->usedGpuMemory = memory_or_na(p);
    /* 0xFFFFFFFF: not in a MIG instance */
    row->gpuInstanceId = p->has_instance ? p->gpu_instance_id : 0xFFFFFFFFu;
    row->computeInstanceId = p->has_instance ? p->compute_instance_id : 0xFFFFFFFFu;
}

static void fill_detail(const fake_process *p, void *out, unsigned int i) {
    nvmlProcessDetail_v1_t *row = (nvmlProcessDetail_v1_t *)out + i;
    row->pid = p->pid;
    row->usedGpuMemory = memory_or_na(p);
    row->gpuInstanceId = p->has_instance ? p->gpu_instance_id : 0xFFFFFFFFu;
    row->computeInstanceId = p->has_instance ? p->compute_instance_id : 0xFFFFFFFFu;
    row->usedGpuCcProtectedMemory = 0;
}

#define PROCESS_ENTRY(symbol, kind, fill)                                                     \
    EXPORT nvmlReturn_t symbol(nvmlDevice_t device, unsigned int *count, void *infos) {       \
        ENTER_DEVICE("processes");                                                            \
        return list_processes(gpu, kind, count, infos, fill);                                 \
    }

PROCESS_ENTRY(nvmlDeviceGetComputeRunningProcesses, PROC_COMPUTE, fill_v1)
PROCESS_ENTRY(nvmlDeviceGetComputeRunningProcesses_v2, PROC_COMPUTE, fill_v2)
PROCESS_ENTRY(nvmlDeviceGetComputeRunningProcesses_v3, PROC_COMPUTE, fill_v2)
PROCESS_ENTRY(nvmlDeviceGetGraphicsRunningProcesses, PROC_GRAPHICS, fill_v1)
PROCESS_ENTRY(nvmlDeviceGetGraphicsRunningProcesses_v2, PROC_GRAPHICS, fill_v2)
PROCESS_ENTRY(nvmlDeviceGetGraphicsRunningProcesses_v3, PROC_GRAPHICS, fill_v2)
/* The fake runs no MPS server: no MPS clients. */
PROCESS_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses, 0, fill_v1)
PROCESS_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses_v2, 0, fill_v2)
PROCESS_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses_v3, 0, fill_v2)

EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                          nvmlProcessDetailList_v1_t *list) {
    ENTER_DEVICE("processes");
    if (!list) return NVML_ERROR_INVALID_ARGUMENT;
    if (list->version != NVML_PROCESS_DETAIL_LIST_V1_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    int kind = list->mode == 0 ? PROC_COMPUTE : list->mode == 1 ? PROC_GRAPHICS : 0;
    if (list->mode > 2) return NVML_ERROR_INVALID_ARGUMENT;
    return list_processes(gpu, kind, &list->numProcArrayEntries, list->procArray, fill_detail);
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                    nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count,
                                                    unsigned long long last_seen) {
    (void)last_seen;
    ENTER_DEVICE("process_utilization");
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int n = 0;
    for (size_t i = 0; i < gpu->nproc; i++)
        if (gpu->procs[i].kinds & PROC_COMPUTE) n++;
    if (n == 0) return NVML_ERROR_NOT_FOUND; /* no samples since last_seen */
    if (!samples || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    unsigned int row = 0;
    for (size_t i = 0; i < gpu->nproc; i++) {
        const fake_process *p = &gpu->procs[i];
        if (!(p->kinds & PROC_COMPUTE)) continue;
        nvmlProcessUtilizationSample_t *s = &samples[row++];
        s->pid = p->pid;
        s->timeStamp =
            (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000;
        s->smUtil = p->sm_util;
        s->memUtil = s->encUtil = s->decUtil = 0;
    }
    *count = n;
    return NVML_SUCCESS;
}
