"""Error types raised by embreg.

All of them subclass ``ValueError`` so callers that already catch bad-input
errors keep working; each message names the bad value and the valid range.
"""


class EmbregError(ValueError):
    """Base class of every error embreg raises for bad input."""


class ConfigError(EmbregError):
    """A recipe or ``--set`` override is malformed (unknown key, wrong type, bad value)."""


class DataError(EmbregError):
    """A data file is missing, malformed, or fails its checksum."""


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. the loss became NaN or infinite)."""


class RunDirectoryLockedError(EmbregError):
    """Another run is writing into the same run directory (it holds ``<run_dir>/.lock``)."""
