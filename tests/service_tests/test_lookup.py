"""Compile-time lookups: the batch query, the cache file, a service that is down (the cache answers) and a
wrong token (refused)."""

from __future__ import annotations

import json
import logging

import pytest
from api_helpers import make_api

from service.client import ServiceError
from service.lookup import ScheduleLookup
from tuner.measure.simulator import Simulator
from tuner.space import ScheduleSpace
from tuner.workloads import Dense

pytestmark = pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")
TUNED, UNTUNED = Dense(1, 128, 256), Dense(1, 64, 64)


def test_lookups_come_from_the_service_then_from_the_cache(backend_url, tmp_path, caplog):
    cache = tmp_path / "schedules.json"
    with make_api(backend_url) as api:
        space = ScheduleSpace(TUNED, "sw26010")
        configs = [space.decode(r) for r in space.sample(6, 0)]
        results = Simulator().measure(TUNED, "sw26010", configs)
        api.client.post("/api/v1/records/import", headers=api.headers("admin"), content="\n".join(
            json.dumps({"workload": TUNED.to_json(), "target": "sw26010", "config": r.config, "status": r.status,
                        "times": list(r.times), "error": r.error, "source": r.source}) for r in results))
        best = min((r for r in results if r.ok), key=lambda r: r.mean_time).config
        lookup = ScheduleLookup("http://testserver", "sw26010", cache_file=cache, http=api.client,
                                token=api.tokens["read"])
        assert lookup.best(TUNED) == best
        assert lookup.best(UNTUNED) is None
        # a wrong token is the caller's mistake, not an outage: refused, nothing cached
        wrong = ScheduleLookup("http://testserver", "sw26010", cache_file=tmp_path / "other.json", http=api.client,
                               token="swt_wrong")
        with pytest.raises(ServiceError) as refused:
            wrong.best(UNTUNED)
        assert refused.value.status == 401 and not (tmp_path / "other.json").exists()
    stored = json.loads(cache.read_text())["sw26010"]
    assert stored == {TUNED.key: best, UNTUNED.key: None}
    # the service is gone: the cache still answers, and an unknown workload is untuned with a warning
    offline = ScheduleLookup("http://127.0.0.1:9", "sw26010", cache_file=cache, timeout=0.5)
    assert offline.best(TUNED) == best
    with caplog.at_level(logging.WARNING):
        assert offline.best(Dense(2, 2, 2)) is None
    assert "unavailable" in caplog.text


def test_an_unreadable_cache_is_ignored_not_fatal(tmp_path, caplog):
    cache = tmp_path / "schedules.json"
    cache.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        lookup = ScheduleLookup("http://127.0.0.1:9", "sw26010", cache_file=cache, timeout=0.5)
    assert "unreadable" in caplog.text and lookup.best(TUNED) is None
