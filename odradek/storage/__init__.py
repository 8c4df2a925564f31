"""The storage engine: Kafka's on-disk log format, segments, indexes, recovery and checkpoints.

Knows nothing of the network; depends only on ``odradek.protocol`` (and ``odradek.faults``, the tests' crash points) (batch headers, errors,
codecs, varints, and the record-batch checks and record scan of ``protocol``).
Produce → ``Log.append_as_leader`` → ``LogValidator`` → ``LocalLog`` → ``LogSegment``;
opening a log → ``LogLoader``.
"""

from .cleaner_manager import CleanerConfig, LogCleaner
from .file_records import FileRecords, FileSlice
from .leader_epoch_cache import LeaderEpochFileCache
from .log import Log, LogAppendInfo, LogReadResult, UnexpectedAppendOffsetError
from .log_config import LogConfig
from .log_manager import LogManager
from .offset_index import OffsetIndex
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .time_index import TimeIndex

__all__ = [
    "CleanerConfig",
    "FileRecords",
    "FileSlice",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogReadResult",
    "LogSegment",
    "OffsetIndex",
    "ProducerStateManager",
    "TimeIndex",
    "UnexpectedAppendOffsetError",
]
