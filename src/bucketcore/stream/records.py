"""The stream store's value types: heads, sessions, intents, read targets, append results, profiles.

These are plain frozen records shared by the store (the protocol, ``store.py``) and every head
store (``heads.py`` declares the interface, ``sql_heads.py`` implements it); they hold no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import CapabilityError
from ..validation import INT64_MAX, check_int

__all__ = [
    "MAX_STREAM_ID",
    "PROFILES",
    "AppendResult",
    "Intent",
    "Profile",
    "ReadTarget",
    "Session",
    "StreamHead",
    "check_attempt_id",
    "check_count",
    "check_offset",
    "check_profile",
    "check_stream_id",
    "check_ttl",
    "check_writer",
]

#: Longest stream id accepted (characters; ids are ASCII).
MAX_STREAM_ID = 200
_STREAM_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@=+-]*")
_WRITER_MAX = 200
_ATTEMPT_MAX = 200


@dataclass(frozen=True, slots=True)
class Profile:
    """A durability profile: which primary WAL a stream writes and when a producer hears success.

    Attributes
    ----------
    name : str
        The profile's name, as passed to ``create_stream``.
    wal : str
        The primary WAL provider (``"object"``: immutable objects in the object directory).
    completion : str
        The producer completion boundary (``"stable-head"``: success once the head CAS is durable).
    """

    name: str
    wal: str
    completion: str


#: The profiles this build can write, by name. Any other name is refused with CapabilityError.
PROFILES: dict[str, Profile] = {
    "object-wal": Profile("object-wal", wal="object", completion="stable-head"),
}


@dataclass(frozen=True, slots=True)
class Session:
    """An append session: the fencing identity a writer presents with every append.

    A newer session of the same stream (a higher ``epoch``) makes this one stale; so does passing
    ``expires_at`` (seconds since the epoch, wall clock).

    Attributes
    ----------
    stream_id : str
    epoch : int
        Strictly increasing per stream; 1 for the first session.
    token : str
        Random fencing token, checked with the epoch by the head CAS.
    writer : str
        The writer's identity (also part of every commit id it makes).
    expires_at : float
        Wall-clock time (``time.time()``) after which the head refuses this session.
    """

    stream_id: str
    epoch: int
    token: str
    writer: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class StreamHead:
    """The durable head of one stream, as the head store holds it.

    Attributes
    ----------
    stream_id : str
    profile : str
    version : int
        Commit version: +1 per committed append (0 for a new stream).
    committed_end : int
        First offset not yet committed (the next append starts here).
    logical_size : int
        Cumulative payload bytes of every committed append (trimming does not lower it).
    last_commit_id : str or None
    epoch : int
        Epoch of the newest session (0 before the first one).
    token : str
        Fencing token of the newest session.
    writer : str or None
        Writer of the newest session.
    lease_expires : float
        Expiry of the newest session (wall clock).
    log_start : int
        First retained offset (raised by ``trim``).
    """

    stream_id: str
    profile: str
    version: int
    committed_end: int
    logical_size: int
    last_commit_id: str | None
    epoch: int
    token: str
    writer: str | None
    lease_expires: float
    log_start: int


@dataclass(frozen=True, slots=True)
class ReadTarget:
    """Where an append's bytes live: the generation-0 physical target of the object WAL.

    Attributes
    ----------
    object_key : str
        File name of the immutable object in the store's ``wal/`` directory.
    length : int
        Declared length of the object in bytes.
    crc32c : int
        CRC32C of the object's bytes before its 4-byte trailer (the trailer holds the same value).
    generation : int
        0: the original append target.
    payload_format : str
        Name of the object format (see docs/stream.md).
    """

    object_key: str
    length: int
    crc32c: int
    generation: int = 0
    payload_format: str = "bucketcore-wal/1"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What a committed append returns.

    Attributes
    ----------
    stream_id : str
    start_offset, end_offset : int
        The committed range ``[start_offset, end_offset)``: one offset per record.
    committed_end : int
        The head's committed end after this append (equals ``end_offset``).
    logical_size : int
        The stream's cumulative payload bytes after this append.
    commit_version : int
        The head's version after this append.
    commit_id : str
        Deterministic id of this append's commit intent.
    read_target : ReadTarget
    record_count, entry_count : int
    """

    stream_id: str
    start_offset: int
    end_offset: int
    committed_end: int
    logical_size: int
    commit_version: int
    commit_id: str
    read_target: ReadTarget
    record_count: int
    entry_count: int


@dataclass(frozen=True, slots=True)
class Intent:
    """A commit intent: the frozen description of one append attempt, written before the head CAS.

    Its ``commit_id`` is derived from (stream, writer, attempt id, start offset), so a retry of the
    same attempt at the same position finds and reuses it.

    Attributes
    ----------
    commit_id, stream_id, writer, attempt_id : str
    epoch : int
        Epoch of the session that first wrote the intent.
    start_offset, end_offset : int
        The frozen range the append will commit, if it commits.
    record_count, entry_count, logical_bytes : int
    object_key : str
    object_length, object_crc : int
        The target's declared length and CRC32C.
    content_crc : int
        CRC32C of the object's manifest and data (the entries, independent of the position).
    state : str
        ``"pending"``, ``"committed"`` or ``"abandoned"`` (the head moved past it).
    commit_version, logical_size : int or None
        The head's version and logical size right after the commit (committed intents only).
    """

    commit_id: str
    stream_id: str
    writer: str
    attempt_id: str
    epoch: int
    start_offset: int
    end_offset: int
    record_count: int
    entry_count: int
    logical_bytes: int
    object_key: str
    object_length: int
    object_crc: int
    content_crc: int
    state: str = "pending"
    commit_version: int | None = None
    logical_size: int | None = None


# ----------------------------------------------------------------------------------------------
# validation at the edge


def check_stream_id(stream_id: Any) -> str:
    """Validate a stream id: ASCII letters, digits and ``_ . : @ = + -``, not starting with ``.``.

    Parameters
    ----------
    stream_id : Any
        The value to check.

    Returns
    -------
    str
        The stream id.

    Raises
    ------
    TypeError
        Not a ``str``.
    ValueError
        Empty, longer than :data:`MAX_STREAM_ID`, holding a path separator, ``..`` or another
        character outside the set above.
    """
    if not isinstance(stream_id, str):
        raise TypeError(f"stream_id must be a str, not {type(stream_id).__name__}")
    if not stream_id:
        raise ValueError("stream_id must not be empty")
    if len(stream_id) > MAX_STREAM_ID:
        raise ValueError(f"stream_id is {len(stream_id)} characters long; at most {MAX_STREAM_ID}")
    if "/" in stream_id or "\\" in stream_id:
        raise ValueError(f"stream_id {stream_id!r} holds a path separator")
    if ".." in stream_id:
        raise ValueError(f"stream_id {stream_id!r} holds '..'")
    if not _STREAM_ID.fullmatch(stream_id):
        bad = next((c for c in stream_id if not re.fullmatch(r"[A-Za-z0-9_.:@=+-]", c)), stream_id[0])
        raise ValueError(
            f"stream_id {stream_id!r} holds {bad!r}: use ASCII letters, digits and _ . : @ = + -, not starting with '.'"
        )
    return stream_id


def check_profile(profile: Any) -> Profile:
    """The :class:`Profile` named ``profile``; fail closed for any other name.

    Parameters
    ----------
    profile : Any
        A profile name.

    Returns
    -------
    Profile

    Raises
    ------
    TypeError
        Not a ``str``.
    CapabilityError
        No writer for that profile is installed in this build.
    """
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a str, not {type(profile).__name__}")
    found = PROFILES.get(profile)
    if found is None:
        raise CapabilityError(
            f"profile {profile!r} is not supported: no writer installed for it "
            f"(installed: {', '.join(sorted(PROFILES))})"
        )
    return found


def _check_text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value or len(value) > limit:
        raise ValueError(f"{name} must be 1..{limit} characters, got {len(value)}")
    if not value.isprintable():
        raise ValueError(f"{name} {value!r} holds a non-printable character")
    return value


def check_writer(writer: Any) -> str:
    """Validate a writer identity (1..200 printable characters).

    Parameters
    ----------
    writer : Any

    Returns
    -------
    str

    Raises
    ------
    TypeError
        Not a ``str``.
    ValueError
        Empty, too long or holding a non-printable character.
    """
    return _check_text(writer, "writer", _WRITER_MAX)


def check_attempt_id(attempt_id: Any) -> str:
    """Validate an attempt id (1..200 printable characters).

    Parameters
    ----------
    attempt_id : Any

    Returns
    -------
    str

    Raises
    ------
    TypeError
        Not a ``str``.
    ValueError
        Empty, too long or holding a non-printable character.
    """
    return _check_text(attempt_id, "attempt_id", _ATTEMPT_MAX)


def check_ttl(ttl: Any) -> float:
    """Validate a session time-to-live in seconds: a finite number > 0.

    Parameters
    ----------
    ttl : Any

    Returns
    -------
    float

    Raises
    ------
    TypeError
        Not an int or float (``bool`` included).
    ValueError
        Not finite or not positive.
    """
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be a number of seconds, not {type(ttl).__name__}")
    ttl = float(ttl)
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"ttl must be a finite number of seconds > 0, got {ttl}")
    return ttl


def check_offset(value: Any, name: str) -> int:
    """Validate an offset: a non-negative int below 2**63 (``bool`` refused).

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        Not an integer.
    ValueError
        Negative or too large.
    """
    return check_int(value, name, lo=0, hi=INT64_MAX)


def check_count(value: Any, name: str) -> int:
    """Validate a count argument: an int in 1..2**63-1 (``bool`` refused).

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        Not an integer.
    ValueError
        Below 1 or too large.
    """
    return check_int(value, name, lo=1, hi=INT64_MAX)
