"""Fault and latency injection, set when the emulator starts (tests and benchmarks)."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Literal

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
