"""Fault and latency injection, set when the emulator starts (tests and benchmarks).

`infra emulator serve` takes them as flags; the in-process emulator of `--local` reads the same settings
from environment variables named after the flags (`--throttle-rate` -> INFRA_EMULATOR_THROTTLE_RATE).
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass
from typing import Any, Literal, Mapping

Fault = Literal["throttle", "error"]


@dataclass(frozen=True)
class FaultConfig:
    latency_s: float = 0.0          # added to every management-plane request
    throttle_rate: float = 0.0      # share of requests answered 429 with Retry-After
    error_rate: float = 0.0         # share of requests answered 500
    lro_failure_rate: float = 0.0   # share of long-running operations that end Failed
    seed: int | None = None
    provisioning_delay_s: float = 2.0   # how long a compute create/update/delete stays in progress
    retry_after_s: int = 1          # the Retry-After a 429 carries

    def __post_init__(self) -> None:
        for name in ("throttle_rate", "error_rate", "lro_failure_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"FaultConfig.{name} must be between 0 and 1, got {value}")
        if self.throttle_rate + self.error_rate > 1.0:
            raise ValueError("FaultConfig: throttle_rate + error_rate must not exceed 1")
        for name in ("latency_s", "provisioning_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"FaultConfig.{name} must not be negative")


# environment variable -> FaultConfig field (the flag of `infra emulator serve`, upper-cased)
ENVIRONMENT = {
    "INFRA_EMULATOR_LATENCY": "latency_s",
    "INFRA_EMULATOR_THROTTLE_RATE": "throttle_rate",
    "INFRA_EMULATOR_ERROR_RATE": "error_rate",
    "INFRA_EMULATOR_LRO_FAILURE_RATE": "lro_failure_rate",
    "INFRA_EMULATOR_PROVISIONING_DELAY": "provisioning_delay_s",
    "INFRA_EMULATOR_SEED": "seed",
}


def fault_config_from_environment(environ: Mapping[str, str] | None = None) -> FaultConfig:
    """The FaultConfig the INFRA_EMULATOR_* variables describe (defaults for those unset); ValueError names
    the variable whose value is not a number or out of range."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}      # FaultConfig's fields by name: floats, and the seed an int
    for variable, name in ENVIRONMENT.items():
        text = environ.get(variable, "").strip()
        if not text:
            continue
        try:
            values[name] = int(text) if name == "seed" else float(text)
        except ValueError:
            raise ValueError(f"{variable}={text!r} is not {'an integer' if name == 'seed' else 'a number'}") from None
        if values[name] != values[name] or values[name] in (float("inf"), float("-inf")):
            raise ValueError(f"{variable}={text!r} is not a finite number")
    try:
        return FaultConfig(**values)
    except ValueError as exc:
        message = str(exc)
        for variable, name in ENVIRONMENT.items():
            message = message.replace(f"FaultConfig.{name}", variable)
        raise ValueError(message) from None


class FaultInjector:
    """Draws the faults of a FaultConfig from one seeded generator (reproducible with a seed)."""

    def __init__(self, config: FaultConfig):
        self.config = config
        self._rng = random.Random(config.seed)
        self._lock = threading.Lock()

    def request_fault(self) -> Fault | None:
        c = self.config
        if not (c.throttle_rate or c.error_rate):
            return None
        with self._lock:
            draw = self._rng.random()
        if draw < c.throttle_rate:
            return "throttle"
        if draw < c.throttle_rate + c.error_rate:
            return "error"
        return None

    def lro_fails(self) -> bool:
        if not self.config.lro_failure_rate:
            return False
        with self._lock:
            return self._rng.random() < self.config.lro_failure_rate
