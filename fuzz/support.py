"""What every harness under fuzz/ shares: the atheris entry point, the reference models' import path,
the way a divergence is reported, and the key generator the hashing and producer harnesses use.

A harness is ``fuzz/fuzz_<name>.py`` with a ``test_one_input(data: bytes) -> None`` that raises
:class:`Divergence` (an ``AssertionError``) when bucketcore disagrees with the harness's oracle, and
lets any other unexpected exception escape: atheris reports both as a finding and saves the input.
Run as a script, a harness hands ``test_one_input`` to atheris (libFuzzer's command line applies);
imported (tests/package/test_fuzz_harnesses_agree_with_their_oracles.py), it is an ordinary function.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
CORPUS = Path(__file__).resolve().parent / "corpus"

# The reference models and oracles live in the test suite (tests/ and its area folders are not
# packages): the harnesses import them from there by module name, so a fuzzer and the tests always
# check against the same model.
_AREAS = sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name != "proto" and not p.name.startswith(("_", ".")))
for _where in (TESTS, *_AREAS):
    if str(_where) not in sys.path:
        sys.path.append(str(_where))

try:
    import atheris
except ImportError:  # the harnesses need it to run; importing this module must not
    atheris = None

_INDEX = re.compile(r"\bindex (\d+)\b")
_INDEX_TUPLE = re.compile(r"\bindex \((\d+(?:, \d+)*)\)")


class Divergence(AssertionError):
    """bucketcore disagreed with the harness's oracle (or raised what it must not)."""


def expect(condition: object, message: str | Callable[[], str]) -> None:
    """Raise :class:`Divergence` unless ``condition`` holds (unlike ``assert``, also under ``-O``).

    Parameters
    ----------
    condition : object
        What must be true.
    message : str or callable returning str
        What went wrong (a callable is called only on failure, for costly descriptions).
    """
    if not condition:
        raise Divergence(message() if callable(message) else message)


def named_index(error: BaseException, shape: tuple[int, ...] | None = None) -> int | None:
    """The index an error message names (``... index 3 ...``; for an array of ``shape``, also
    ``... index (1, 2) ...``, returned flat, in C order), or None when it names none."""
    found = _INDEX.search(str(error))
    if found is not None:
        return int(found.group(1))
    found = _INDEX_TUPLE.search(str(error))
    if found is None or shape is None:
        return None
    position = tuple(int(i) for i in found.group(1).split(", "))
    if len(position) != len(shape) or not all(0 <= i < n for i, n in zip(position, shape)):
        return None
    flat = 0
    for i, n in zip(position, shape):
        flat = flat * n + i
    return flat


@contextlib.contextmanager
def instrumented() -> Iterator[None]:
    """Python-level coverage for the bucketcore modules imported inside the block (when atheris is
    installed; kernels get their coverage from the instrumented build, see tools/fuzz.sh)."""
    if atheris is None:
        yield
        return
    with atheris.instrument_imports(include=["bucketcore"]):
        yield


def models_raise_assertions(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a call into a test-suite model so its pytest failures (``pytest.raises`` that saw no
    exception is a ``BaseException``, ``Failed``) become :class:`Divergence`: atheris and the tests
    then see one kind of finding."""
    from _pytest.outcomes import OutcomeException

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OutcomeException as failure:
            raise Divergence(f"{fn.__name__}: {failure}") from None

    wrapped.__name__ = fn.__name__
    return wrapped


def main(test_one_input: Callable[[bytes], None]) -> None:
    """Fuzz ``test_one_input`` with atheris, libFuzzer taking its options from ``sys.argv``."""
    if atheris is None:
        raise SystemExit("atheris is not installed: pip install 'bucketcore[fuzz]' (see docs/fuzzing.md)")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


# ------------------------------------------------------------------------------------------------
# keys of every kind hash_keys takes (and some it refuses), with what each must hash to

#: What a key must do: ("hash", bytes hashed), ("keyless",), ("type",) a TypeError naming its
#: index, ("encoding",) a KeyEncodingError naming its index (strict only), ("value",) a ValueError
#: naming its index (a strided memoryview: bucketcore hashes a buffer's bytes in C order only).
Expected = tuple[Any, ...]


class _Str(str):
    """A str subclass: hashed as the str it is."""


class _Bytes(bytes):
    """A bytes subclass: hashed as the bytes it is."""


def consume_text(fdp: Any, size: int) -> str:
    """A str of up to ``size`` characters: ASCII, BMP (surrogates included) or astral, or a mix."""
    kind = fdp.ConsumeIntInRange(0, 3)
    if kind == 3:
        parts = [fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 20)) for _ in range(fdp.ConsumeIntInRange(1, 4))]
        return "".join(parts)
    return fdp.ConsumeUnicode(size)


def consume_key(fdp: Any, *, max_len: int = 80, odd_kinds: bool = True) -> Any:
    """One key: mostly str and bytes of fuzzed content and length, sometimes bytearray, memoryview,
    subclasses, None, NaN, and (``odd_kinds``) values that are not keys at all."""
    kind = fdp.ConsumeIntInRange(0, 15 if odd_kinds else 11)
    size = fdp.ConsumeIntInRange(0, max_len) if fdp.ConsumeProbability() < 0.95 else fdp.ConsumeIntInRange(0, 400)
    if kind <= 3:
        return consume_text(fdp, size)
    if kind <= 6:
        return fdp.ConsumeBytes(size)
    if kind == 7:
        return bytearray(fdp.ConsumeBytes(size))
    if kind == 8:
        raw = fdp.ConsumeBytes(size)
        cut = fdp.ConsumeIntInRange(0, len(raw))
        return memoryview(raw)[cut:]  # a contiguous view that does not start at its object's start
    if kind == 9:
        return _Str(consume_text(fdp, size)) if fdp.ConsumeBool() else _Bytes(fdp.ConsumeBytes(size))
    if kind == 10:
        return None
    if kind == 11:
        return math.nan
    if kind == 12:
        raw = fdp.ConsumeBytes(size + 2)
        return memoryview(raw)[::2]  # strided: refused (not C-contiguous)
    return fdp.PickValueInList([0, 1.5, True, ["x"], {"k": 1}, b"x".decode, (), math.inf])


def java_utf8(text: str) -> bytes:
    """Java's ``String.getBytes(UTF_8)`` of ``text`` (the test suite's oracle of errors="replace")."""
    from test_hashes_match_mmh3_and_the_design_vectors import java_utf8 as reference

    return reference(text)


def expected_of(key: Any, errors: str) -> Expected:
    """What hashing ``key`` must give under ``errors`` ("strict" or "replace"), decided without
    bucketcore."""
    if key is None or (isinstance(key, float) and math.isnan(key)):
        return ("keyless",)
    if isinstance(key, str):
        try:
            return ("hash", key.encode("utf-8"))
        except UnicodeEncodeError:
            return ("hash", java_utf8(key)) if errors == "replace" else ("encoding",)
    if isinstance(key, (bytes, bytearray)):
        return ("hash", bytes(key))
    if isinstance(key, memoryview):
        # an empty view has no byte order to get wrong: hashed as b"" whatever its strides
        return ("hash", key.tobytes()) if key.c_contiguous or key.nbytes == 0 else ("value",)
    return ("type",)
