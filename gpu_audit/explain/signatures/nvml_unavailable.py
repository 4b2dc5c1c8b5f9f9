"""NVML, the NVIDIA driver's management library, does not work.

nvidia-smi, pynvml, the container runtime and PyTorch itself all use NVML. It fails when its
library (installed with the driver, in user space) and the loaded kernel module have different
versions (a driver upgraded without a reboot), when the library is missing (a container started
without the driver's libraries), when the library loaded lacks a function a program needs (the
CUDA toolkit's stub or an old copy found ahead of the driver's, or an old driver: torch then stops
at its first CUDA allocation), when the kernel module is not loaded, or when a container has
lost access to the GPU device files. While NVML is broken, an out-of-memory in PyTorch turns
into an NVML INTERNAL ASSERT (class `nvml-assert-oom`).
"""

from __future__ import annotations

from typing import Any

from gpu_audit.explain.signatures.guards import unless_marks, unless_words
from gpu_audit.explain.signatures.nvml_assert_oom import NVML_ASSERT, nvml_assert
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    fixed,
    signature,
)
from gpu_audit.explain.signatures.texts import REBOOT_MISMATCH
from gpu_audit.knowledge.allocator import alloc_conf_export
from gpu_audit.model import Severity

CLASS = document_class("nvml-unavailable", __doc__)

_NVML_MISMATCH = (
    "The NVML library (user space, installed with the driver) and the loaded NVIDIA kernel "
    "module have different versions: the driver was upgraded, often by unattended upgrades, "
    "while the old kernel module is still loaded. nvidia-smi and NVML fail until they match, "
    "and CUDA often does too.")
_LIBRARY_MISSING = (
    "{library}, part of the NVIDIA driver, could not be found or loaded: no driver "
    "is installed, the container was started without the driver's libraries, or the tool runs "
    "where there is no NVIDIA GPU (a GPU monitor on a laptop or a Mac).")
# The library by platform, for the title and the explanation: the log's own words say which.
_LINUX_LIBRARY = "libnvidia-ml.so.1"
_ANY_LIBRARY = "NVML's library (libnvidia-ml.so.1 on Linux, nvml.dll on Windows)"
_WINDOWS_REMEDY = (
    "Install or repair the NVIDIA driver (nvml.dll comes with it, in C:\\Windows\\System32, "
    "or under C:\\Program Files\\NVIDIA Corporation\\NVSMI with older drivers); check with "
    "`nvidia-smi` in a new terminal and `where nvml.dll`.")
_LIBRARY_REMEDY = (
    "Install the NVIDIA driver on the host; in containers use the NVIDIA Container Toolkit "
    "(`docker run --gpus all`) rather than copying driver libraries into the image; check with "
    "`ldconfig -p | grep libnvidia-ml`.")
# Inside a MIG instance NVML answers only for the MIG device: queries about the parent GPU
# (its memory, its utilisation) return NVML_ERROR_NO_PERMISSION.
_MIG_QUERIES = ("A program that asks NVML about the parent GPU instead of its MIG device fails "
                "there although CUDA sees the MIG device.")
_MIG_REMEDY = ("On MIG, query the MIG device's handle (`nvmlDeviceGetMigDeviceHandleByIndex`) or "
               "ask CUDA (`torch.cuda.mem_get_info()`), or use a version of the program that "
               "supports MIG; check with `nvidia-smi -L` inside the container.")
# Lines that nvidia-smi and the kernel print only for a version mismatch.
_MISMATCH_ONLY = {"nvml-unavailable/nvrm-api-mismatch", "nvml-unavailable/library-version",
                  "nvml-unavailable/nvrm-kernel-version"}


# Docker's daemon, asked for GPUs (`docker run --gpus all`, compose's `capabilities: [gpu]`),
# has no device driver registered for them: the NVIDIA Container Toolkit is not installed, or
# Docker was not configured and restarted after it was ('could not select device driver "" with
# capabilities: [[gpu]]'; the driver's name in quotes when one was asked for).
fixed("nvml-unavailable/docker-no-gpu-driver",
      r"could not select device driver \"(?P<device_driver>[^\"\n]{0,40})\" with capabilities: "
      r"\[\[(?P<capabilities>[^\]\n]{0,80}?\bgpu\b[^\]\n]{0,80})\]\]",
      ("could not select device driver",),
      "Docker has no GPU support: the NVIDIA Container Toolkit is missing or not configured",
      tier=0.5,
      example='docker: Error response from daemon: could not select device driver "" with '
      "capabilities: [[gpu]].",
      explanation="Docker was asked to give the container GPUs, but no device driver for GPUs "
      "is registered with its daemon: the NVIDIA Container Toolkit is not installed on the "
      "host, or Docker was not configured for it and restarted. The container did not start.",
      remedy="Install the NVIDIA Container Toolkit (package nvidia-container-toolkit, from "
      "NVIDIA's repository), then register it with Docker and restart the daemon:\n"
      "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker\n"
      "Check with `docker run --rm --gpus all ubuntu nvidia-smi`. (Rootless Docker and Podman "
      "use CDI instead: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`.)")


# A GPU's device node missing where a program looked for it ("no NVIDIA GPU device is present:
# /dev/nvidia0 does not exist", as container runtimes and GPU tools say it): the container was
# started without the GPUs, or the host's driver never created the nodes.
fixed("nvml-unavailable/no-device-node",
      r"\b[Nn]o NVIDIA GPU device is present\b|: ?/dev/nvidia\d{1,2} does not exist\b",
      ("NVIDIA GPU device is present", "does not exist"),
      "No NVIDIA GPU device node (/dev/nvidia*) where the program ran", tier=0.5,
      example="no NVIDIA GPU device is present: /dev/nvidia0 does not exist",
      explanation="The program found no GPU device node: /dev/nvidia0 (and its siblings) do not "
      "exist where it ran. In a container, the GPUs were not given to it (no `--gpus`, no NVIDIA "
      "runtime, or a device plugin that allotted none); on the host, the NVIDIA driver is not "
      "loaded, so it never created the nodes.",
      remedy="On the host: `ls -l /dev/nvidia*` and `nvidia-smi`; if both fail, load or reinstall "
      "the driver (`sudo modprobe nvidia`, `dmesg | grep -i nvrm`). For a container, start it "
      "with `--gpus all` (or `--runtime=nvidia`, or the device plugin's `nvidia.com/gpu` "
      "request) with the NVIDIA Container Toolkit installed and configured "
      "(`sudo nvidia-ctk runtime configure --runtime=docker`, then restart the daemon).")


@signature("nvml-unavailable/nvrm-kernel-version",
           r"NVRM: this kernel module has the version (?P<kernel_version>[\d.]+)",
           ("this kernel module has",), "NVIDIA kernel module version", attach="only", window=4,
           example="NVRM: this kernel module has the version 550.90.07.  Please")
@signature("nvml-unavailable/nvrm-api-mismatch",
           r"NVRM: API mismatch: the client (?:'[^']*' \(pid \d+\) )?has the version "
           r"(?P<client_version>[\d.]+)(?:[^\n]*?this kernel module has the version "
           r"(?P<kernel_version>\d+(?:\.\d+)+))?",
           ("API mismatch",), "NVIDIA driver user-space and kernel module versions differ",
           tier=0.0, attach="prefer", window=4,
           example="[  812.332110] NVRM: API mismatch: the client has the version 550.127.05, "
           "but")
@signature("nvml-unavailable/container-cli",
           # (also without its program's name, as a title or a quote keeps it: "initialization
           # error: nvml error: driver not loaded"; those words are the container CLI's own)
           r"(?:nvidia-container-cli: )?initialization error: (?:nvml error: (?P<reason>[^:]+)|"
           r"load library failed: (?P<library>libnvidia-ml[^:]*))",
           ("nvidia-container-cli", "initialization error: nvml error",
            "initialization error: load library failed"),
           "The container runtime could not initialise NVML",
           tier=0.5,
           example="nvidia-container-cli: initialization error: nvml error: driver/library "
           "version mismatch: unknown")
@signature("nvml-unavailable/pynvml",
           r"NVMLError_?(?P<kind>LibraryNotFound|DriverNotLoaded|LibRmVersionMismatch|"
           r"NoPermission|Uninitialized|Unknown)\b|(?P<text>NVML Shared Library Not Found|RM has "
           r"detected an NVML/RM version mismatch)|"
           # Rust's nvml-wrapper, as its error-chain and its enum print the kind
           r"(?:NVMLError\(Error\(|NvmlError::)(?P<kind_>[A-Z]\w+)|"
           # go-nvml's return codes, as a Go program (a device plugin, an exporter) prints them
           r"\bnvml\.(?:Init|Shutdown)\(\) failed: (?:NVML_)?ERROR_(?P<kind__>LIBRARY_NOT_FOUND|"
           r"DRIVER_NOT_LOADED|LIB_RM_VERSION_MISMATCH|NO_PERMISSION|UNKNOWN)\b",
           ("NVML", "NvmlError", "nvml.Init() failed", "nvml.Shutdown() failed"),
           "NVML is not usable (pynvml)", tier=0.0,
           example="pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found")
@signature("nvml-unavailable/library-missing",
           # (also retyped without dlopen's colon, as a title keeps it: "libnvidia-ml.so.1 cannot
           # open shared object file: permission denied")
           # (and dlopen's reason when the file is there but may not be read: "permission denied")
           r"(?P<library>libnvidia-ml\.so(?:\.\d+)?):? (?:cannot open shared object file"
           r"(?::\s*(?P<reason>[Pp]ermission denied))?|"
           # (the same dlopen error in a Chinese or Japanese locale)
           r"无法打开共享对象文件|共有オブジェクトファイルを開けません)|"
           r"(?:[Cc]an't|[Cc]annot|[Ff]ailed to|[Cc]ould not|[Uu]nable to) (?:load|find|open) "
           r"(?:the )?NVML(?: shared)? library|"
           # macOS has no NVML: dlopen's own words
           r"(?P<macos>dlopen)\((?P<library_>libnvidia-ml[\w.]*), \d+\): (?:image not found|"
           r"Library not loaded|no suitable image)|"
           # other tools' words (nvtop, gpustat, monitoring agents)
           r"NVML (?:shared )?library (?:is )?not (?:installed|found|available)|"
           r"NVML (?:is )?not (?:installed|found|supported)\b|"
           # the CUDA toolkit's stub library loaded instead of the driver's: its own warning, and
           # the tools' words for it
           r"(?P<stub>NVIDIA Display Driver\. By default it's installed in|libnvidia-ml\.so in "
           r"GDK package is a stub|libnvidia-ml(?:\.so)? library at wrong path)|"
           # Windows: the DLL's name, and pynvml's own line that reports it missing (a
           # traceback cut before the exception names only the constant it checks)
           r"(?P<windows>nvml\.dll)\b[^\n]{0,80}?(?:not found|could not be found|cannot be "
           r"found|not be loaded)|"
           r"(?:\w{0,40}[Cc]heck_?[Rr]eturn|raise NVMLError)\(NVML_ERROR_LIBRARY_NOT_FOUND\)|"
           # the library told missing ("`libnvidia-ml.so.1` missing in the pod"; not "if ...")
           + unless_words("if|whether|you|your|make sure") + r"(?P<library__>"
           r"libnvidia-ml\.so(?:\.\d+)?)`? (?:is |was )?missing\b|"
           # ... or told not found, in English and in Chinese ("can't find libnvidia-ml.so.1",
           # "`libnvidia-ml.so.1` could not be found", ldd's "libnvidia-ml.so.1 => not found",
           # "找不到libnvidia-ml.so.1"; not in a condition, nor a loader that goes on to the next
           # name: "Failed to load libnvidia-ml.so. Trying libnvidia-ml.so.1")
           + unless_words("if|whether|you|your|make sure", also="如果|若|是否") + r"(?i:"
           # (also "fails to find the `nvidia-ml.so.1` library", "doesn't find libnvidia-ml")
           r"(?:can'?t|can ?not|could ?n[o']t|unable to|fail(?:s|ed|ing)? to|does ?n[o']t|"
           r"did ?n[o']t) (?:find|load|locate) (?:the )?"
           r"`?(?P<library___>libnvidia-ml(?:\.so(?:\.\d+)?)?|nvidia-ml\.so(?:\.\d+)?)|"
           r"(?P<library____>libnvidia-ml\.so(?:\.\d+)?)`?(?: =>)? (?:is |was )?(?:not found\b"
           r"(?! in /)|(?:could ?n[o']t|can ?not|can't) be (?:found|loaded))|"
           r"(?:找不到|未找到|没有找到|无法找到|无法加载|加载不到|加载失败|缺少|缺失)\s*[`'\"]?"
           r"(?P<library_____>libnvidia-ml(?:\.so(?:\.\d+)?)?)|"
           r"(?P<library______>libnvidia-ml(?:\.so(?:\.\d+)?)?)[`'\"]?\s*(?:找不到|未找到|"
           r"加载失败|不存在|缺失))(?![^\n]{0,40}?\b(?i:trying|falling back)\b)",
           ("libnvidia-ml", "nvidia-ml.so", "NVML library", "NVML shared library", "NVML is not",
            "NVML not",
            "NVIDIA Display Driver", "nvml.dll", "NVML_ERROR_LIBRARY_NOT_FOUND"),
           "The NVML library cannot be loaded", tier=0.0,
           example="OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or "
           "directory")
@signature("nvml-unavailable/library-version",
           r"NVML library version: (?P<library_version>[\d.]+)",
           ("NVML library version",), "NVML library version", attach="only", window=4,
           example="NVML library version: 550.127")
# (also without a reason: a tool that prints only "Error: Failed to initialize NVML")
@signature("nvml-unavailable/init-failed",
           r"Failed to initialize NVML(?:: (?P<reason>[^\n]+)|[\s.!]*$)|"
           # the writer's error told by a link to a thread named after it ("I got an error
           # stated in https://.../nvidia-nvml-driver-library-version-mismatch"; not a link
           # offered to the reader: "if you get ..., see ...")
           + unless_words("if|whether|you|your|should|see") + r"(?i:\b(?:I|we)(?:'ve| "
           r"have| had)? (?:got|get|getting|hit|had|ran into|encountered|am getting|are getting"
           r"|keep getting)\b[^\n]{0,60}?\berror\b[^\n]{0,60}?https?://[^\s)]{0,200}?"
           r"(?P<reason_>driver[-_]library[-_]version[-_]mismatch))",
           ("initialize NVML", "version-mismatch", "version_mismatch"),
           "NVML could not be initialised", tier=0.5,
           example="Failed to initialize NVML: Driver/library version mismatch")
def _nvml_init(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    reason = str(numbers.get("reason") or numbers.get("kind") or numbers.get("text") or "")
    # (go-nvml spells the kind as a constant: "LIBRARY_NOT_FOUND" reads as "LibraryNotFound")
    low = reason.lower().replace("_", "")
    title = sig.title
    if "mismatch" in low or sig.id in _MISMATCH_ONLY or "LibRmVersionMismatch" in reason:
        explanation, remedy = _NVML_MISMATCH, REBOOT_MISMATCH
        client, kernel = numbers.get("client_version"), numbers.get("kernel_version")
        library = numbers.get("library_version")
        if client or kernel:
            explanation += (f" Here the user-space side is {client or 'unknown'} and the kernel "
                            f"module {kernel or 'unknown'}.")
        elif library:
            explanation += f" The NVML library here is {library}."
        title = "NVML: driver/library version mismatch"
    elif "unknown" in low:
        explanation = (
            "NVML started but could not talk to the GPUs. Inside a container this usually means "
            "it lost access to /dev/nvidia* (a `systemctl daemon-reload` on the host resets the "
            "device rules of running containers); on the host it points at a driver fault.")
        remedy = ("Restart the container; run `nvidia-smi` on the host; if the host fails too, "
                  "check `sudo dmesg -T | grep -i -e nvrm -e xid` and reboot.")
    elif numbers.get("library") and "permission" in low:  # the library, not the devices
        explanation = (
            f"{numbers.get('library', _LINUX_LIBRARY)} (NVML) is there but this process may not "
            "open it (permission denied): the file's or its directory's mode, an SELinux or "
            "AppArmor policy, or a container runtime (nvidia-container-cli) running as a user, "
            "or in a user namespace, without access to the driver's files.")
        remedy = ("Check the library and its links as that user (`ls -lL $(ldconfig -p | grep "
                  "libnvidia-ml.so.1 | awk '{print $NF}')`), the security policy's denials "
                  "(`sudo dmesg -T | grep -i -e denied -e apparmor`, `getenforce`), and run the "
                  "container runtime as root or with the driver's files readable.")
        title = f"The NVML library ({numbers.get('library', _LINUX_LIBRARY)}) may not be opened"
    elif "permission" in low:
        explanation = ("This user cannot open the GPU device files (/dev/nvidia*); or, in a "
                       "container given one MIG instance, NVML refuses queries about the whole "
                       "GPU (the parent device) while the MIG device itself works. "
                       + _MIG_QUERIES)
        remedy = ("Check `ls -l /dev/nvidia*` and the user's groups; in containers pass the "
                  "GPUs with the NVIDIA Container Toolkit (`--gpus all`). " + _MIG_REMEDY)
    elif numbers.get("stub"):
        explanation = (
            "The libnvidia-ml.so loaded is the CUDA toolkit's stub (under .../stubs/), which only "
            "lets programs link: it has no driver behind it, so every NVML call fails. The "
            "driver's own libnvidia-ml.so.1 was not found first on the library path.")
        remedy = ("Remove the toolkit's stubs directory from LD_LIBRARY_PATH (and from "
                  "/etc/ld.so.conf.d), so that the driver's library is loaded; check with "
                  "`ldconfig -p | grep libnvidia-ml`. " + _LIBRARY_REMEDY)
    elif "notsupported" in low:
        explanation = (
            "NVML answered Not Supported to what the tool asked: this GPU or driver does not "
            "offer that query (many are missing on GeForce and laptop GPUs, and under older "
            "drivers), and the tool stopped on it instead of going without.")
        remedy = ("Run `nvidia-smi -q` to see what this GPU reports; update the driver, or "
                  "turn off the tool's feature that needs the query.")
    elif numbers.get("macos"):
        explanation = ("dlopen (macOS) found no libnvidia-ml: NVIDIA's driver, and with it NVML, "
                       "does not exist for macOS, so nothing that needs NVML (or CUDA) runs "
                       "there.")
        remedy = ("Run the job on a Linux (or Windows) machine with an NVIDIA GPU and driver; on "
                  "a Mac, PyTorch uses the GPU through MPS (device='mps'), without NVML.")
    elif numbers.get("windows"):
        explanation = _LIBRARY_MISSING.format(library="nvml.dll (NVML)")
        remedy, title = _WINDOWS_REMEDY, "The NVML library (nvml.dll) cannot be loaded"
    elif numbers.get("library"):
        explanation, remedy = (_LIBRARY_MISSING.format(library=f"{_LINUX_LIBRARY} (NVML)"),
                                _LIBRARY_REMEDY)
        title = f"The NVML library ({_LINUX_LIBRARY}) cannot be loaded"
    elif ("librarynotfound" in low or "library not found" in low
          or sig.id == "nvml-unavailable/library-missing"):
        # the log does not say which system: both libraries' names, both remedies
        explanation = _LIBRARY_MISSING.format(library=_ANY_LIBRARY)
        remedy = f"{_LIBRARY_REMEDY} On Windows: {_WINDOWS_REMEDY}"
    elif "notloaded" in low or "not loaded" in low:
        explanation = "The NVIDIA kernel module is not loaded, so NVML has no driver to talk to."
        remedy = ("`lsmod | grep nvidia`; reinstall the driver for the running kernel (DKMS) or "
                  "boot the kernel it was built for; Secure Boot can block unsigned modules.")
    else:
        explanation = f"NVML could not be initialised ({reason or 'no reason given'})."
        remedy = "Run `nvidia-smi` and `gpu-audit scan` to see the driver's state."
    return advice(sig, numbers, explanation, remedy, title=title)


@signature("nvml-unavailable/call-unknown-error",
           # a tool's report of the NVML call that failed (nvdebugdump, monitoring agents)
           r"(?P<call>nvml(?:Device[A-Z]\w+|Init(?:_v\d)?))\(\)(?::| failed:?) Unknown Error",
           ("nvmlDevice", "nvmlInit"), "An NVML call failed with Unknown Error", tier=0.5,
           example="Error: nvmlDeviceGetHandleByIndex(): Unknown Error")
def _nvml_call_unknown(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"NVML loaded, but {numbers.get('call', 'its call')} could not reach the GPU (Unknown "
        "Error): inside a container it lost access to /dev/nvidia* (a `systemctl "
        "daemon-reload` on the host resets the device rules of running containers); in a "
        "virtual machine (passthrough, vGPU, Hyper-V GPU-PV) the guest's driver cannot reach "
        "the GPU the host gives it; on bare metal it points at a driver fault.")
    remedy = ("Run `nvidia-smi` on the host: if it works there, restart the container, or fix "
              "the VM's GPU assignment (host and guest drivers of the same branch, the GPU "
              "given to the VM); if the host fails too, check `sudo dmesg -T | grep -i -e nvrm "
              "-e xid` and reboot.")
    return advice(sig, numbers, explanation, remedy)


# A program's report that an NVML query failed after NVML started ("NVML: Unable to get memory
# info", "NVML: Failed to get device count"): a query NVML refused (a MIG instance's parent GPU,
# a GPU that does not offer it) or a driver that stopped answering.
@signature("nvml-unavailable/query-failed",
           r"\bNVML: (?:[Uu]nable to|[Ff]ailed to|[Cc]ould not|[Cc]annot|[Cc]an't) (?:get|query|"
           r"read|retrieve) (?P<query>[A-Za-z][\w ]{1,40}?)(?=[.:;,)]|\s*$)",
           ("NVML: ",), "An NVML query failed", tier=0.5,
           example="CUDA information: NVML: Unable to get memory info")
def _nvml_query_failed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    query = numbers.get("query") or "a query"
    explanation = (
        f"NVML is loaded, but the program's query ({query}) failed, and the program went on as "
        "if there were no usable GPU. In a container given one MIG instance, NVML refuses "
        "queries about the whole GPU (No Permission) while CUDA sees the MIG device: a program "
        "that asks about the parent GPU fails there. Outside MIG, a query this GPU or driver "
        "does not offer, or a driver that stopped answering, fails the same way.")
    remedy = (_MIG_REMEDY + " Elsewhere, run `nvidia-smi -q` to see what the GPU reports and "
              "check `sudo dmesg -T | grep -i -e nvrm -e xid`.")
    return advice(sig, numbers, explanation, remedy)


@signature("nvml-unavailable/no-gpu-to-monitor", r"\bNo GPU to monitor\b",
           ("No GPU to monitor",), "nvtop found no GPU it can read", tier=0.5,
           example="No GPU to monitor.")
def _no_gpu_to_monitor(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "nvtop reads NVIDIA GPUs through NVML, which it loads at start (libnvidia-ml.so.1), and "
        "found none: the library is not on the loader's path (a Nix, Conda or container "
        "environment that does not see the system's libraries, or ldconfig's cache without "
        "its directory), the CUDA toolkit's stub was loaded instead of the driver's, or the GPU "
        "has no NVML at all (a Jetson's integrated GPU: use jtop or tegrastats there).")
    remedy = ("Check `ldconfig -p | grep libnvidia-ml`: if it is empty, add the driver's library "
              "directory to /etc/ld.so.conf.d and run `sudo ldconfig` (or set LD_LIBRARY_PATH "
              "in a Nix or Conda shell); check that `nvidia-smi` works. " + _LIBRARY_REMEDY)
    return advice(sig, numbers, explanation, remedy)


# nvidia-smi's words when the driver answered but NVML listed no GPU (a GPU gone from the bus
# says so in the kernel's log, which ranks before it); also retold in lower case in a sentence
# that names nvidia-smi ('nvidia-smi shows "no devices were found" error'; not in a condition
# or advice: "if nvidia-smi says no devices were found, ..."), or "device not found"
fixed("nvml-unavailable/no-devices-found",
      r"\bNo devices were found\b|"
      + unless_words("if|whether|you|your|should|make sure") + r"(?i:\bnvidia-smi\b"
      r"[^\n]{0,60}?\b(?:no (?:GPU )?devices? (?:(?:were|was) )?found|"
      # (or retold as 'nvidia-smi displays the message "Device not found"')
      r"(?:the |GPU )?devices? (?:(?:was|were|is) )?not found)\b)",
      ("No devices were found", "nvidia-smi"), "nvidia-smi found no GPU through the driver",
      tier=0.5,
      example="No devices were found",
      explanation="The NVIDIA driver is loaded and answered, but NVML lists no GPU: the GPU is "
      "not given to this container or VM, the driver does not support this GPU (a GPU newer "
      "than the driver branch, or the open kernel module a GPU needs), or the GPU dropped off "
      "the bus.",
      remedy="`lspci -nn | grep -i nvidia` (is the GPU on the bus?) and `sudo dmesg -T | grep -i "
      "-e nvrm -e xid` (did the driver refuse it, or did it fall off?); in a container, start it "
      "with `--gpus all` (or the device plugin's GPU request); install a driver branch that "
      "supports this GPU; a GPU that fell off the bus needs a reboot, and a drain if it "
      "recurs.")


# nvidia-smi's "Unable to determine the device handle ... Unknown Error" for a GPU at a PCI slot
# other than 0: a bare-metal GPU is the one device behind its PCIe port (bus:00.0), an emulated
# bus in a virtual machine puts devices at other slots (00:03.0, 02:01.0). There the guest's
# driver could not start the GPU handed to it; a GPU that fell off a bare-metal bus is below.
fixed("nvml-unavailable/guest-device-handle",
      r"Unable to determine the device handle for GPU ?(?P<pci_bus_id>(?:[0-9A-Fa-f]{3,8}:)?"
      r"[0-9A-Fa-f]{2}:(?!00\.)[0-9A-Fa-f]{2}\.[0-7]): Unknown Error",
      ("Unable to determine the device handle",),
      "The driver in a virtual machine cannot start its passed-through GPU", tier=0.5,
      key_field="pci_bus_id",
      example="Unable to determine the device handle for GPU 0000:00:05.0: Unknown Error",
      explanation="The GPU sits at a virtual machine's emulated PCI slot and the guest's NVIDIA "
      "driver could not start it: GeForce drivers before 465 refuse to run when they see a "
      "hypervisor, the GPU was not reset when the VM restarted, or the host's driver still holds "
      "it. A GPU that fell off the host's bus shows an Xid 79 in the host's kernel log.",
      remedy="Hide the hypervisor from the guest (libvirt: `<kvm><hidden state='on'/></kvm>`, "
      "QEMU: `-cpu host,kvm=off`) or install driver 465 or newer in the guest; bind the GPU to "
      "vfio-pci on the host before the NVIDIA driver loads; after a VM restart that leaves it "
      "unusable, reset the GPU on the host (or reboot the host); check the host's `dmesg` for "
      "Xid 79.")


@signature("nvml-unavailable/nvidia-smi-no-driver",
           r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|"
           # (its words without its name, as a title or a quote keeps them, and retold after
           # "nvidia-smi" in the writer's words: "nvidia-smi tells me it could not connect to the
           # Nvidia driver"; not in a condition or advice: "if nvidia-smi can't talk to ...")
           + unless_words("if|whether|you|your|should|make sure|check") + r"(?i:"
           r"\b(?:could ?n[o']t|can'?t|can ?not|unable to) communicate with the NVIDIA driver\b|"
           r"\bnvidia-smi\b[^\n]{0,60}?\b(?:could ?n[o']t|can'?t|can ?not|unable to|fail(?:s|ed)? "
           r"to) (?:communicate|connect|talk) (?:with|to) the NVIDIA driver\b)|"
           r"NVIDIA-SMI couldn't find (?P<missing>libnvidia-ml\.so)|"
           # (its words retold, e.g. in a title: "nvidia-smi command can't find libnvidia-ml.so
           # library")
           r"(?i:(?:could ?n[o']t|can'?t|can ?not) find )(?P<missing_>libnvidia-ml\.so) library\b|"
           # (... and in Chinese: "`nvidia-smi`报了找不到`libnvidia-ml.so`的错误")
           r"(?i:nvidia-smi)[^\n]{0,30}?(?:找不到|无法找到)\W{0,2}(?P<missing__>libnvidia-ml\.so)"
           r"(?![.\d])",
           # a symptom: a kernel message about why the driver did not load ranks before it;
           # but a cause of CUDA's "no device" (cuInit's CUDA_ERROR_NO_DEVICE, tier 0.5): with
           # no driver to talk to, CUDA finds no GPU either, so this ranks just before that
           ("NVIDIA-SMI", "libnvidia-ml.so library", "找不到", "无法找到", "communicate with",
            "connect to the", "talk to the", "talk with the"),
           "nvidia-smi cannot talk to the NVIDIA driver",
           tier=0.45,
           example="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
           "driver. Make sure that the latest NVIDIA driver is installed and running.")
def _nvidia_smi_no_driver(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("missing"):
        explanation = ("nvidia-smi could not find libnvidia-ml.so: the driver's libraries are "
                       "missing.")
    else:
        explanation = (
            "nvidia-smi found no working NVIDIA driver: the kernel module is not loaded (not built "
            "for the running kernel after a kernel update, blocked by Secure Boot, or failed to "
            "load because the GPU is in a bad state).")
    remedy = ("`lsmod | grep nvidia` and `sudo dmesg -T | grep -i nvrm`; reinstall the driver "
              "for the running kernel (DKMS) or reboot into the kernel it was built for.")
    return advice(sig, numbers, explanation, remedy)


# The NVIDIA kernel module would not load, in the words of what tried to load it: modprobe and
# insmod ("could not insert 'nvidia': Key was rejected by service", "Module nvidia not found"),
# RPM Fusion's boot message ("NVIDIA kernel module missing. Falling back to nouveau"), the
# driver's installer ("Unable to load the kernel module 'nvidia.ko'") and the X server's driver
# ("Failed to load the NVIDIA kernel module"). Without it NVML and CUDA have no driver; nvidia-smi
# says it cannot communicate with the driver (that line ranks after this one: its symptom).
_MODULE = r"nvidia(?:[-_](?:uvm|drm|modeset|peermem|current))?"
KERNEL_MODULE = (
    rf"\b(?:modprobe|insmod): (?:ERROR|FATAL): could not insert (?:module )?'?[\w./-]*?"
    rf"(?P<module>{_MODULE})(?:\.ko)?'?: (?P<reason>[^\n]{{1,80}}?)\s*$|"
    rf"\bmodprobe: FATAL: Module (?P<module_>{_MODULE}) (?P<reason_>not found)\b|"
    r"(?P<reason__>(?i:NVIDIA kernel module (?:is )?missing))\b|"
    rf"\bUnable to load the (?:kernel module '(?P<module__>{_MODULE})\.ko'|"
    rf"'(?P<module___>{_MODULE})' kernel module)|"
    r"\bFailed to load the NVIDIA kernel module\b|"
    # (nvidia-modprobe's for the unified memory module, as nvidia-smi or CUDA print it in a
    # container: "Error: Could not load UVM kernel module")
    r"\b(?P<reason____>Could not load (?:the )?UVM kernel module)\b|"
    # the driver's own words when it found no GPU to take ("NVRM: No NVIDIA GPU found.", "The
    # NVIDIA probe routine was not called for 3 device(s)": another driver holds them)
    r"\bNVRM: (?P<reason___>No NVIDIA (?:graphics adapter|GPU|devices?) (?:probed|found)|The "
    r"NVIDIA probe routine was not called for \d+ device)")
# A title that says the driver does not load ("NVIDIA driver don't load on startup when secure
# boot is enabled", "Nvidia driver not loading after update"): the module, in the writer's words.
DRIVER_NOT_LOADING_TITLE = (
    r"\bnvidia(?: kernel)? (?:driver|module)s? (?:is |are |still )*(?:not (?:loading|loaded)|"
    r"(?:do|does|did|will|would)(?: not|n'?t) load|won'?t load|fail(?:s|ed)? to load)\b")
# What the kernel's or modprobe's reason says (lower case), and what it means.
_MODULE_REASONS = (
    (("key was rejected", "required key not available", "signature", "lockdown"),
     "The kernel refused the module because it is not signed with a key it trusts: Secure "
     "Boot is on, and the module built for this kernel (by DKMS or the installer) was either "
     "not signed, or signed with a Machine Owner Key (MOK) that was never enrolled (enrolling "
     "needs the MOK manager's blue screen at the next boot).",
     "Enroll the key the modules were signed with (`sudo mokutil --import "
     "/var/lib/dkms/mok.pub`, or the key your distribution's driver package created; then "
     "reboot and finish the enrollment in the MOK manager), or install the driver from your "
     "distribution's signed packages, or turn Secure Boot off in the firmware; check with "
     "`mokutil --sb-state` and `sudo dmesg | grep -i -e nvidia -e 'module verification'`."),
    (("not found", "missing"),
     "No NVIDIA kernel module exists for the running kernel: the kernel was updated and the "
     "module was not rebuilt for it (DKMS or akmods failed, or the driver was installed for "
     "another kernel with the .run installer), or the driver's kernel package is not "
     "installed.",
     "Rebuild it for the running kernel: `sudo dkms autoinstall` (Fedora: `sudo akmods "
     "--force`), or reinstall the driver's DKMS package with the headers of `uname -r` "
     "installed; or boot the kernel the module was built for. Check with `modinfo nvidia` and "
     "`dkms status`; on Fedora, wait for akmods to finish building after an update before "
     "rebooting."),
    (("unknown symbol", "exec format", "invalid module format"),
     "The module was built for a different kernel than the one running (or against the wrong "
     "headers), so the kernel cannot link it.",
     "Rebuild the module for the running kernel (`sudo dkms autoinstall` with the headers of "
     "`uname -r` installed) or reinstall the driver; check `sudo dmesg | grep -i nvidia`."),
    (("no such device", "no nvidia", "probe routine"),
     "The module found no GPU it supports: the GPU is not on the PCI bus (check `lspci`), it is "
     "held by another driver (nouveau, vfio-pci), or this driver branch does not support it "
     "(too new a GPU for an old branch, a legacy GPU for a new one, or a GPU that needs the "
     "open kernel module).",
     "Check `lspci -nnk | grep -A3 -i nvidia` (which driver holds the GPU) and `sudo dmesg | "
     "grep NVRM` (the driver says why it refused the GPU); blacklist nouveau, or install a "
     "driver branch that supports this GPU."),
)


_MODULE_UNKNOWN = (
    "The NVIDIA kernel module could not be loaded, so there is no driver for NVML, nvidia-smi "
    "or CUDA to talk to: most often Secure Boot refusing an unsigned module, or no module built "
    "for the running kernel.",
    "`sudo modprobe nvidia` and `sudo dmesg | grep -i -e nvidia -e nvrm` say why; `mokutil "
    "--sb-state` (Secure Boot), `dkms status` and `modinfo nvidia` (a module for `uname -r`); "
    "reinstall the driver for the running kernel.")


@signature("nvml-unavailable/kernel-module", KERNEL_MODULE,
           ("could not insert", "FATAL: Module", "kernel module missing", "Kernel Module Missing",
            "kernel module is missing", "Unable to load the", "Failed to load the NVIDIA",
            "NVRM: No NVIDIA", "probe routine", "UVM kernel module"),
           "The NVIDIA kernel module could not be loaded", tier=0.0,
           example="modprobe: ERROR: could not insert 'nvidia': Key was rejected by service")
def _kernel_module(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    reason = str(numbers.get("reason") or "").lower()
    module = numbers.get("module") or ("nvidia_uvm" if "uvm" in reason else "nvidia")
    explanation, remedy = next(
        ((explanation, remedy) for words, explanation, remedy in _MODULE_REASONS
         if any(word in reason for word in words)), _MODULE_UNKNOWN)
    title = f"The NVIDIA kernel module ({module}) could not be loaded"
    # (no GPU taken: after the driver's own line that says why, such as a GPU it does not
    # support, which ranks first)
    tier = 0.1 if explanation == _MODULE_REASONS[3][1] else sig.tier
    return advice(sig, numbers, explanation, remedy, title=title, tier=tier)


@signature("nvml-unavailable/torch-warning", r"Can't initialize NVML",
           ("initialize NVML",), "PyTorch could not initialise NVML", severity=Severity.WARNING,
           tier=0.5,
           example="/usr/lib/python3/dist-packages/torch/cuda/__init__.py:654: UserWarning: "
           "Can't initialize NVML")
def _nvml_torch_warning(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "torch could not initialise NVML. Training can still run, but torch.cuda memory and "
        "utilisation queries fail, and if this job runs out of GPU memory the OOM report fails "
        "too: it turns into an NVML INTERNAL ASSERT instead of the real out-of-memory message.")
    remedy = ("Check with `nvidia-smi` or `gpu-audit scan`; a \"Driver/library version mismatch\" "
              "needs a reboot.")
    return advice(sig, numbers, explanation, remedy)


# torch resolves a fixed list of NVML functions from the libnvidia-ml.so.1 it loads
# (c10/cuda/driver_api.cpp, at the first CUDA allocation), each with
# `TORCH_INTERNAL_ASSERT(<fn>_, "Can't find <fn>: ", dlerror())`: a library that lacks one (the
# CUDA toolkit's stub, an old copy ahead of the driver's on the loader path, WSL's, an old
# driver) stops the job there. The assert's head names the function (`r.<fn>_`), dlerror's
# "<library>: undefined symbol: <fn>" the library; a log that wraps or cuts the line keeps one
# or the other.
_NVML_FUNCTION = r"nvml[A-Z]\w{1,60}?"
DRIVER_API_NVML = (
    rf"\br\.(?P<function>{_NVML_FUNCTION})_ INTERNAL ASSERT FAILED\b(?: at [\"'`]?"
    r"[^\"'`\n]{0,200}?driver_api\.cpp[\"'`]?(?::(?P<source_line>\d+))?"
    r"(?:[^\n]{0,120}?Can't find \w{1,80}: (?P<library>[^\n:]{1,300}?): undefined symbol\b)?)?|"
    rf"\bCan't find (?P<function_>{_NVML_FUNCTION}):(?: (?P<library_>[^\n:]{{1,300}}?): "
    r"undefined symbol\b|\s*$)|"
    # the loader's own words, from torch or any program that asks the library for the function
    # (the path read from its start only: a scan from every byte would cost the square)
    r"(?:^|(?<=[\s'\"`(=]))"
    rf"(?P<library__>[^\s:'\"`]{{0,300}}libnvidia-ml\.so[.\d]{{0,8}}): undefined symbol: "
    rf"(?P<function__>{_NVML_FUNCTION})\b")
_WHICH_NVML = (
    "See which libnvidia-ml.so.1 the job loads, in the job's own environment:\n"
    "echo \"$LD_LIBRARY_PATH\"; ldconfig -p | grep libnvidia-ml\n"
    "python -c \"import ctypes; ctypes.CDLL('libnvidia-ml.so.1'); "
    "print(open('/proc/self/maps').read())\" | grep libnvidia-ml\n"
    "(for a running process: `grep libnvidia-ml /proc/<pid>/maps`). The driver's own copy lives "
    "in the system's library directory (/usr/lib/x86_64-linux-gnu, /usr/lib64) with the "
    "driver's version in its name (libnvidia-ml.so.<driver version>). Remove the other copy "
    "from the path: take its directory (a CUDA toolkit's stubs/, a copy shipped in the image "
    "or a virtual environment) out of LD_LIBRARY_PATH and /etc/ld.so.conf.d (then `sudo "
    "ldconfig`), or delete the copy from the image and let the NVIDIA Container Toolkit mount "
    "the host's (`docker run --gpus all`). If the driver's own library is the one loaded, the "
    "driver is older than this torch needs: update the NVIDIA driver (`nvidia-smi` shows its "
    "version).")


@signature("nvml-unavailable/library-function-missing", DRIVER_API_NVML,
           ("_ INTERNAL ASSERT", "Can't find nvml", "undefined symbol: nvml"),
           "The NVML library loaded lacks a function the program needs", tier=0.0,
           example='RuntimeError: r.nvmlDeviceGetNvLinkRemoteDeviceType_ INTERNAL ASSERT FAILED '
           'at "/pytorch/c10/cuda/driver_api.cpp":37, please report a bug to PyTorch. Can\'t '
           'find nvmlDeviceGetNvLinkRemoteDeviceType: /usr/local/cuda/lib64/stubs/'
           'libnvidia-ml.so.1: undefined symbol: nvmlDeviceGetNvLinkRemoteDeviceType')
def _nvml_function_missing(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    function = numbers.get("function") or "an NVML function"
    library = str(numbers.get("library") or "")
    where = f" ({library})" if library else ""
    explanation = (
        f"The NVML library this process loaded{where} has no {function}, and the program needs "
        "it: torch looks NVML's functions up at its first CUDA allocation "
        "(c10/cuda/driver_api.cpp) and stops there (its \"Can't initialize NVML\" warning, where "
        "one came earlier, is the same library). " + _nvml_copy_kind(library))
    return advice(sig, numbers, explanation, _WHICH_NVML)


def _nvml_copy_kind(library: str) -> str:
    """What the library's path says about whose copy it is."""
    if "/stubs/" in library:
        return ("It is the CUDA toolkit's stub (under stubs/), which only lets programs link "
                "and has no driver behind it, found ahead of the driver's own library.")
    if "/wsl/" in library:
        return ("It is WSL's copy (/usr/lib/wsl/lib), which comes with the Windows driver: "
                "that driver is older than this torch needs.")
    return ("Such a library is not the running driver's own: a container's stub, a copy in a "
            "directory on LD_LIBRARY_PATH (a toolkit, a virtual environment, an image) or WSL's "
            "found ahead of it; or the driver itself is older than this torch needs.")


@signature("nvml-unavailable/nvml-assert", NVML_ASSERT, ("NVML_SUCCESS",),
           "NVML failed inside PyTorch (INTERNAL ASSERT)", extract=nvml_assert, tier=0.5,
           example='RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL '
           'ASSERT FAILED at "/pytorch/c10/cuda/PeerToPeerAccess.cpp":131, please report a bug '
           'to PyTorch.')
def _nvml_assert_other(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    call = numbers.get("nvml_call") or "an NVML call"
    if "PeerToPeer" in str(numbers.get("source_file")):
        explanation = (
            f"With expandable_segments on a CUDA 12.4+ build, PyTorch asks NVML about peer/fabric "
            f"access on the first expandable allocation; {call} failed and the assert fired "
            "without any out-of-memory. NVML does not work in this process (usually a "
            "driver/library version mismatch).")
        remedy = (REBOOT_MISMATCH + " Until then, expandable_segments can be left off: "
                  + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    else:
        explanation = (f"PyTorch called NVML ({call}) and it failed; NVML does not work in this "
                       "process (usually a driver/library version mismatch after an upgrade).")
        remedy = "Run `nvidia-smi` or `gpu-audit scan`. " + REBOOT_MISMATCH
    return advice(sig, numbers, explanation, remedy)


# nvidia-smi is not in the container or on the host at all: the shells' and runtimes' words for a
# missing program ("bash: nvidia-smi: command not found", the OCI runtime's `exec: "nvidia-smi":
# executable file not found in $PATH`, chroot's and Python's "No such file or directory",
# Windows' "is not recognized"), and a writer who says so ("nvcc and nvidia-smi not found"; not
# in a condition or advice to the reader: "if nvidia-smi is not found").
# nvidia-smi (or NVML's library) there but not runnable: the driver's files are built for glibc,
# and a musl image (Alpine) has no glibc loader ("cannot execute: required file not found",
# bash's word for a missing interpreter) nor its symbols (musl's "Error relocating").
fixed("nvml-unavailable/smi-cannot-execute",
      r"\bnvidia-smi: cannot execute: required file not found|"
      r"\bError relocating [^\s:]{0,200}?(?:nvidia-smi|libnvidia-ml\.so[.\d]{0,8}): "
      r"[^\s:]{1,80}: symbol not found",
      ("nvidia-smi", "libnvidia-ml"),
      "nvidia-smi cannot run here: the driver's tools need glibc (a musl image such as Alpine)",
      tier=0.5,
      example="Error relocating /usr/bin/nvidia-smi: __strdup: symbol not found",
      explanation="nvidia-smi is in the container, mounted from the host by the NVIDIA Container "
      "Toolkit, but cannot start: the driver's programs and libraries (nvidia-smi, "
      "libnvidia-ml.so, libcuda.so) are built against glibc, and this image has musl (Alpine, "
      "or another musl-based base) without the glibc loader (/lib64/ld-linux-x86-64.so.2) or "
      "the symbols they need. NVML and CUDA cannot load in it either.",
      remedy="Base the image on a glibc distribution (debian-slim, ubuntu, nvidia/cuda) instead "
      "of Alpine (or build the program that needs the GPU into such an image); then "
      "`docker run --gpus all IMAGE nvidia-smi` shows the GPUs.")


# nvidia-smi told failing, without its message: "I can't get nvidia-smi to work in the pod",
# "nvidia-smi doesn't work inside the container" (not a condition or advice: "if nvidia-smi
# fails in a container, ..."); as a thread's title, any "nvidia-smi error", "nvidia-smi not
# working", "Unable to start nvidia-smi" (documents.py)
# (NVML's mismatch in the writer's words: "a driver/library version mismatch")
_MISMATCH_TOLD = r"(?:an? |the )?(?:NVIDIA )?driver[/ -]library version mismatch(?![A-Za-z])"
SMI_FAILS_TITLE = (
    r"\bnvidia-smi`?\b[^\n]{0,40}?\b(?:errors?\b|fail(?:s|ed|ing|ure)?\b|(?:is |are )?not "
    r"working\b|(?:does|do|did|will|would)(?: not|n'?t) work\b|won'?t work\b|stop(?:s|ped)? "
    # (or hangs: "nvidia-smi hangs on hopper", the driver not answering it)
    r"working\b|hangs\b|hung\b|(?:is |gets )?stuck\b|freezes\b)|"
    r"\b(?:can'?t|cannot|could ?n[o']t|unable to|impossible to) (?:get|make|run|start|use) "
    r"`?nvidia-smi`?(?: to)?(?: work)?\b")
fixed("nvml-unavailable/smi-fails-told",
      # an installer's or a launcher's own check that ran nvidia-smi and got an error back
      # ("warning: gpu support may not be enabled, check that you have installed GPU drivers:
      # nvidia-smi command failed"): its message names the program and no cause
      r"\bnvidia-smi`? command failed\b|"
      + unless_words("if|whether|you|your|should|make sure|check|when") + r"(?i:"
      r"\b(?:I|we) (?:still )?(?:can'?t|cannot|could ?n[o']t|am unable to|was unable to|were "
      r"unable to) (?:get|make) `?nvidia-smi`? (?:to )?work\b|"
      r"\bnvidia-smi`? (?:still |just )?(?:(?:does|did)(?: not|n'?t) work|won'?t work|(?:is |was )?"
      r"not working|stopped working|fails|failed) (?:in|inside|within) (?:the|a|my|our|any) "
      r"(?:pod|container|docker container)s?\b)|"
      # (or the writer unable to use it in a guest, told in its own sentence: "... after the
      # update. i can not use nvidia-smi in wsl2")
      + unless_words("if|whether|you|your|should|make sure|check|when|how|why",
                     start=r"(?:^|(?<=[.!;:] ))", stop=r"\n.!?;:")
      + r"(?i:\b(?:I|we) (?:still |just )?(?:can'?t|can ?not|could ?n[o']t|(?:am|was|were) "
      r"unable to) (?:use|run|start|launch) `?nvidia-smi`? (?:in|inside|within|under|from) "
      r"(?:the |a |my |our |any )?(?:pods?|containers?|docker|WSL ?2?|VMs?|virtual machines?|"
      r"guests?)\b)|"
      # (NVML or nvidia-smi told failing in other words: "NVML fails to initialize inside the
      # container", "nvidia-smi can't talk to the driver after the kernel update", 'nvidia-smi
      # fails with "Failed to initialize NVML"'; not a rule: "... when the module is not loaded")
      + unless_words("if|whether|you|your|should|make sure|check|when|how|why|usually|often|"
                     "typically|may|might|could|would")
      + r"(?i:\bnvidia-smi`? (?:suddenly |just |has |then )?(?:stopped working|no longer works|"
      r"(?:does|did)(?: not|n'?t) work any ?more)\b|"
      r"\bNVML (?:still |just )?(?:fails|failed|won'?t|can'?t|cannot|could ?n[o']t) "
      r"(?:to )?(?:initiali[sz]e|init|load|start)\b|"
      r"\bnvidia-smi`? (?:(?:says|said|reports|reported|complains|complained) (?:that )?it )?"
      r"(?:still |just |now )?(?:can'?t|cannot|could ?n[o']t|is unable to|was "
      r"unable to|fails to|failed to|no longer) (?:talk|communicate|connect) (?:to|with) (?:the )?"
      r"(?:NVIDIA |nvidia )?driver\b(?![^\n]{0,40}\b(?:when|if|unless|whenever)\b)|"
      # (its message retold: "ran nvidia-smi and got a message saying that it cannot
      # communicate to the driver")
      r"\bnvidia-smi`?\b[^\n.]{0,40}?\b(?:message|error|output)s? (?:saying|that says|stating) "
      r"(?:that )?(?:it )?(?:can'?t|cannot|could ?n[o']t|is unable to) (?:talk|communicate|"
      r"connect) (?:to|with) (?:the )?(?:NVIDIA |nvidia )?driver\b|"
      r"\bnvidia-smi`? (?:\w+ ){0,2}?(?:fails|failed|says|said|shows|showed|returns|returned|"
      r"gives|gave|prints|printed|reports|reported|errors? out|errored out)(?: with)?:? "
      r"[\"'`]?(?:Failed to initiali[sz]e NVML\b|" + _MISMATCH_TOLD + r")|"
      # (NVML's mismatch met by the writer, its message not pasted: "after apt upgraded the
      # driver I got a driver/library version mismatch until I rebooted")
      r"\b(?:I|we)(?:'ve| have| had| still| keep| kept)? (?:get|got|getting|hit|had|ran into|"
      r"run into|encounter(?:ed)?|see|saw|am getting|are getting|was getting|were getting|"
      r"getting) (?:an? |the |this )?(?:(?:NVML|nvidia-smi|nvml)(?:'s)? )?" + _MISMATCH_TOLD
      + r")|"
      # (... and in Chinese: "nvidia-smi报Driver/library version mismatch", "出现了driver/library
      # version mismatch")
      + unless_marks("如何|怎么|怎样|如果|若|是否|为什么|可能")
      + r"(?:报|出现|提示|显示|遇到)了?\s?[\"'`]?(?i:" + _MISMATCH_TOLD + r")|"
      # (... and in Japanese and Korean, the message then its appearing: "... mismatchと出ます",
      # "... mismatch가 뜹니다")
      + unless_marks("もし|場合|方法|ですか|만약|경우|방법|나요|까요")
      + r"(?i:" + _MISMATCH_TOLD + r")[\"'`]?\s?(?:と(?:出|表示|言われ)|が(?:出|表示)|(?:가|이) "
      r"?(?:뜹|떠|뜨|나옵|나와))|"
      # (and in the languages such reports are written in: "容器里nvidia-smi用不了",
      # "nvidia-smi无法和驱动通信", "nvidia-smiが動きません", "nvidia-smi가 작동하지 않습니다",
      # "nvidia-smi не видит драйвер", "nvidia-smi funktioniert nicht", "nvidia-smi no funciona",
      # "nvidia-smi ne fonctionne pas", "nvidia-smi não funciona"; not a condition or a question)
      r"^(?![^\n]*(?:如果|若|是否|为什么|怎么|如何|もし|場合|만약|경우|[？?]))"
      r"(?!(?i:[^\n]*\b(?:if|если|wenn|falls|si|se|caso|quand)\b))[^\n]*?nvidia-smi`?\s?"
      r"(?:(?:命令)?(?:用不了|无法使用|無法使用|不能用|不能使用|运行不了|没法用|(?:无法|不能)(?:和|与|跟)驱动通信)|"
      r"(?:が|は)(?:動きません|動かない|使えない|使えません|動作しない|動作しません)|"
      r"(?:가|이)? ?(?:작동하지 않|작동이 안|실행되지 않|실행이 안|안 됩니다|안 돼)|"
      r"(?i:не (?:работает|запускается|видит (?:драйвер|видеокарт\w*))|(?:funktioniert|läuft) "
      r"(?:\w+ ){0,3}?nicht\b|no (?:funciona|arranca)\b|ne (?:fonctionne|marche) (?:pas|plus)\b|"
      r"não (?:funciona|roda)\b))",
      ("nvidia-smi", "NVML", "ersion mismatch"), "nvidia-smi fails (told in the writer's words)",
      tier=0.5,
      yields_to_titles=True,
      example="I can't get nvidia-smi to work in the pod, the same image works with docker.",
      explanation="The writer says nvidia-smi does not work, without its message. The usual "
      "causes: in a container or a Kubernetes pod, the NVIDIA runtime did not give it the GPUs "
      "and the driver's files (a pod without `runtimeClassName: nvidia`, a container without "
      "`--gpus`); on a host after a driver update, the loaded kernel module is older than the "
      "new libraries (NVML's \"Driver/library version mismatch\", which a reboot cures); or "
      "the NVIDIA kernel module is not loaded at all.",
      remedy="Run `nvidia-smi` where it fails and read its one-line message. In a pod, set "
      "`runtimeClassName: nvidia` (or make nvidia the default containerd runtime) and a "
      "`nvidia.com/gpu` limit; with docker, `docker run --gpus all ...` with the NVIDIA "
      "Container Toolkit configured (`sudo nvidia-ctk runtime configure`). On a host after a "
      "driver update: " + REBOOT_MISMATCH + " If the module is not loaded (`lsmod | grep "
      "nvidia`), reinstall the driver for the running kernel.")

# nvidia-smi's own check that the NVML it loaded is its driver's ("Mismatch in versions between
# nvidia-smi and NVML. Are you sure you are using nvidia-smi provided with the driver?"): another
# libnvidia-ml.so.1 came first (LD_LIBRARY_PATH, LD_PRELOAD, a hook library, a container's stale
# copy), or nvidia-smi is not the driver's.
fixed("nvml-unavailable/smi-nvml-mismatch",
      r"\bMismatch in versions between nvidia-smi and NVML\b",
      ("Mismatch in versions between nvidia-smi",),
      "nvidia-smi loaded an NVML library of another driver version", tier=0.5,
      example="Mismatch in versions between nvidia-smi and NVML. Are you sure you are using "
      "nvidia-smi provided with the driver?",
      explanation="nvidia-smi checks that the NVML library it loaded (libnvidia-ml.so.1) comes "
      "from its own driver, and this one does not: a copy of another driver version comes first "
      "in the library path (LD_LIBRARY_PATH or LD_PRELOAD, a library that hooks NVML, a stale copy "
      "baked into a container image), or the nvidia-smi run is not the driver's. Tools and "
      "programs that load that library read the GPUs through the wrong NVML too.",
      remedy="See which library is loaded: `ldd $(command -v nvidia-smi)`, `ldconfig -p | grep "
      "libnvidia-ml` and `echo $LD_LIBRARY_PATH $LD_PRELOAD`; remove the other copy from the path "
      "(in a container, do not copy the driver's libraries into the image: the NVIDIA Container "
      "Toolkit mounts the host's), and run the nvidia-smi that came with the driver.")

fixed("nvml-unavailable/smi-missing",
      r"\bnvidia-smi: (?:command )?not found|command not found: nvidia-smi\b|"
      # (also with its quotes escaped again by each daemon that logged it: exec: \\\"nvidia-smi)
      r"exec: \\{0,7}\"nvidia-smi\\{0,7}\": executable file not\b|"
      # (Docker's words before the OCI runtime's: "Container command 'nvidia-smi' not found or
      # does not exist")
      r"\bContainer command '?nvidia-smi'? not found\b|"
      # (the same, retyped without the runtime's words: "nvidia-smi executable file not found
      # in $PATH", a thread's title)
      r"\bnvidia-smi[\"'`]?:? executable file not found\b|"
      r"failed to run command .nvidia-smi.: No such file|"
      r"No such file or directory: .nvidia-smi.|"
      r"'?nvidia-smi'? is not recognized as an internal or external command|"
      # (or told absent where the writer runs, in a sentence of its own: "It sounds like there
      # is no nvidia-smi for WSL2")
      + unless_words("if|whether|you|your|should|make sure|check",
                     start=r"(?:^|(?<=[.!;:] ))", stop=r"\n.!?;:")
      # (not on macOS, which has no NVIDIA driver to fail: "there is no nvidia-smi for macOS")
      + r"(?i:\bthere(?: is|'s) no [\"'`]?nvidia-smi[\"'`]? (?:for|in|on|inside|under|"
      r"within)\b(?! (?:mac ?OS|OS ?X|Macs?)\b))|"
      + unless_words("if|whether|you|your|should|make sure|check") + r"(?:"
      r"\bnvidia-smi`? (?:is |was )?(?:not found|missing)\b|"
      # (or the shell's answer retold: "nvidia-smi shows command not found", "running
      # nvidia-smi gives me 'command not found'")
      r"\bnvidia-smi`? (?:still |now |just )?(?:shows|showed|says|said|gives|gave|returns|"
      r"returned|reports|prints|printed|displays|outputs)(?: me)?(?: an?| the)?:? [\"'`]?"
      r"command not found\b|"
      # (or told not found: "failing to find nvidia-smi means we don't find gpu nodes")
      r"(?i:\b(?:can'?t|can ?not|could ?n[o']t|unable to|fail(?:s|ed|ing)? to|does ?n[o']t) "
      r"(?:find|locate) `?nvidia-smi\b))",
      ("nvidia-smi",), "nvidia-smi is not there (no NVIDIA driver tools in this container or host)",
      tier=0.5,
      example='docker: Error response from daemon: OCI runtime create failed: starting container '
      'process caused "exec: \\"nvidia-smi\\": executable file not found in $PATH": unknown.',
      explanation="The program nvidia-smi does not exist where it was run. It is part of the "
      "NVIDIA driver, not of CUDA images: inside a container, the NVIDIA Container Toolkit mounts "
      "it, with libnvidia-ml.so.1 and the other driver libraries, from the host when the "
      "container starts with GPUs. A container started without the NVIDIA runtime or without "
      "`--gpus` (a Kubernetes pod whose runtime is not the NVIDIA one) has neither, and NVML and "
      "CUDA fail in it too; on a host, the driver is not installed.",
      remedy="On the host, check that `nvidia-smi` works (the driver is installed). Start the "
      "container with GPUs: `docker run --gpus all ...` (or `--runtime=nvidia`), with the NVIDIA "
      "Container Toolkit installed and the runtime configured (`sudo nvidia-ctk runtime "
      "configure --runtime=docker` or `--runtime=containerd`, then restart it); on Kubernetes, "
      "give the pod `runtimeClassName: nvidia` (or make nvidia the default runtime) and a "
      "`nvidia.com/gpu` limit. Inside the container, `ls /usr/bin/nvidia-smi` and `ldconfig -p | "
      "grep libnvidia-ml` show whether the driver's files were mounted.")
