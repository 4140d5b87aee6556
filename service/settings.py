"""Service settings from SWTUNE_-prefixed environment variables (pydantic-settings)."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from db.engine import DEFAULT_URL, normalize_url


class Settings(BaseSettings):
    """Every knob of the API server and its tuning driver. ``SWTUNE_DATABASE_URL`` etc."""

    model_config = SettingsConfigDict(env_prefix="SWTUNE_", extra="ignore")

    database_url: str = Field(DEFAULT_URL, description="the tuning log: a file path (SQLite) or a SQLAlchemy URL")
    # Auth is on for `swtune serve`; the embedded single-user demo turns it off (loopback only).
    auth_enabled: bool = True
    token_cache_seconds: float = Field(10.0, ge=0, description="how long a checked token is trusted")
    invalid_token_cache_seconds: float = Field(
        2.0, ge=0, description="how long an unknown token is answered 401 without asking the database")
    rate_limit_per_second: float = Field(
        1000.0, ge=0, description="requests a second per API token on average (0: no limit); 429 above")
    rate_limit_burst: float = Field(2000.0, ge=1, description="requests a token may send at once")
    max_long_polls: int = Field(256, ge=0, description="lease requests that may wait for work at once")

    lease_seconds: float = Field(60.0, gt=0, le=3600, description="lease length; workers heartbeat to extend")
    max_attempts: int = Field(3, ge=1, le=100, description="leases of a job before it is given up as failed")
    max_lease_batch: int = Field(256, ge=1, le=512)
    long_poll_max_seconds: float = Field(30.0, ge=0, le=120)
    long_poll_interval_seconds: float = Field(0.25, gt=0, description="database re-check period while polling")

    max_body_bytes: int = Field(1_000_000, ge=1024, description="request body limit (413 above)")
    max_import_bytes: int = Field(256_000_000, ge=1024, description="body limit of the records import")

    lookup_cache_seconds: float = Field(
        1.0, ge=0, description="best-config answers are reused this long (0: always ask the database)")

    driver_enabled: bool = True
    driver_interval_seconds: float = Field(0.5, gt=0, description="refill period (results also wake it)")
    queue_depth: int = Field(32, ge=1, description="pending+leased jobs the driver keeps per task")
    default_strategy: str = Field("", description="search strategy when a task names none ('' = model if "
                                                  "registered, else random)")
    transfer_rows: int = Field(4000, ge=0, description="newest measurements of the target's other workloads "
                                                       "a new task's cost model starts from (0: no transfer)")

    @field_validator("database_url")
    @classmethod
    def _tuning_log(cls, value: str) -> str:
        return normalize_url(value)  # a path becomes a SQLite URL; anything unusable is refused here

    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
