"""NVML return codes, sorted into what the collector does about each."""

from __future__ import annotations

from enum import Enum

from servescope.core.errors import ServescopeError


class ErrorScope(Enum):
    LIBRARY = "library"  # the whole source is down; re-initialise next cycle
    DEVICE = "device"  # this GPU is down; re-initialise next cycle
    FIELD = "field"  # this one field is absent on this GPU; stop asking
    TRANSIENT = "transient"  # this reading failed this time; try again next cycle


# code: (reason label, scope)
_CODES: dict[int, tuple[str, ErrorScope]] = {
    1: ("uninitialized", ErrorScope.LIBRARY),
    2: ("invalid_argument", ErrorScope.FIELD),
    3: ("not_supported", ErrorScope.FIELD),
    4: ("no_permission", ErrorScope.FIELD),
    6: ("not_found", ErrorScope.TRANSIENT),
    9: ("driver_not_loaded", ErrorScope.LIBRARY),
    10: ("timeout", ErrorScope.TRANSIENT),
    12: ("library_not_found", ErrorScope.LIBRARY),
    13: ("function_not_found", ErrorScope.FIELD),
    14: ("corrupted_inforom", ErrorScope.TRANSIENT),
    15: ("gpu_lost", ErrorScope.DEVICE),
    16: ("reset_required", ErrorScope.DEVICE),
    17: ("operating_system", ErrorScope.TRANSIENT),
    18: ("lib_rm_version_mismatch", ErrorScope.LIBRARY),
    20: ("insufficient_memory", ErrorScope.TRANSIENT),
    21: ("no_data", ErrorScope.TRANSIENT),
    25: ("argument_version_mismatch", ErrorScope.FIELD),
    26: ("deprecated", ErrorScope.FIELD),
    27: ("not_ready", ErrorScope.TRANSIENT),
    28: ("gpu_not_found", ErrorScope.DEVICE),
    999: ("unknown", ErrorScope.TRANSIENT),
}

NOT_SUPPORTED = 3
NO_PERMISSION = 4
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
GPU_NOT_FOUND = 28
UNKNOWN = 999


class NvmlError(ServescopeError):
    """An NVML call returned `code`; independent of the binding so the collector never imports it."""

    def __init__(self, code: int, call: str) -> None:
        self.code = code
        self.call = call
        self.reason, self.scope = _CODES.get(code, (f"nvml_error_{code}", ErrorScope.TRANSIENT))
        super().__init__(f"{call}: NVML error {code} ({self.reason})")
