"""The OpenACC-like baseline time of a workload under the simulator profile its tuned times come from.

A tuned time from a simulator worker was measured with the target's active profile (db.profiles); the
baseline it is compared with (``swtune demo``'s speedups, a model submission's task weights) must be
simulated with the same profile, or the speedup would mostly measure the difference between two profiles.
"""

from __future__ import annotations

from tuner.baseline import baseline_time
from tuner.profile import DEFAULT_VERSION, Profile
from tuner.space.factory import space_for
from tuner.task_kind import kind_of
from tuner.workloads import Workload


def profiled_baseline_time(workload: Workload, target: str, profile: Profile | None) -> float | None:
    """Simulated seconds of one call under the OpenACC-like schedule with ``profile``'s costs (None, or the
    built-in profile: ``tuner.baseline.baseline_time``, cached). None when there is no valid baseline."""
    if profile is None or profile.version == DEFAULT_VERSION:
        return baseline_time(workload, target)
    space = space_for(workload, profile.apply(target))  # the space's target carries the profile's costs
    kind = kind_of(workload)
    try:
        config = kind.baseline(space)
    except RuntimeError:
        return None
    return kind.baseline_seconds(space, config)
