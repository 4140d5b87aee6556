"""Sunway schedule spaces: knobs per operator and their vectorized analysis."""

from tuner.space.analysis import REASONS, Analysis
from tuner.space.factory import space_for
from tuner.space.knobs import Knob
from tuner.space.space import Config, ScheduleSpace, config_hash

__all__ = ["REASONS", "Analysis", "Config", "Knob", "ScheduleSpace", "config_hash", "space_for"]
