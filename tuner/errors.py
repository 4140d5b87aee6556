"""Domain exceptions of the tuner package; the service maps them to HTTP status codes once."""


class SwtuneError(Exception):
    """Base class of every error swtune raises on purpose."""


class InvalidWorkloadError(SwtuneError, ValueError):
    """A workload spec that describes no valid operator instance."""


class InvalidConfigError(SwtuneError, ValueError):
    """A schedule configuration that is not a point of its space."""


class UnsupportedStrategyError(SwtuneError, ValueError):
    """A search strategy that a kind of task does not run (a kind never swaps in another)."""


class NotBuiltYetError(SwtuneError, ValueError):
    """A request for something swtune does not do yet; the message names what to use instead."""


class UnknownTargetError(SwtuneError, KeyError):
    """A target name with no preset."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else "unknown target"
