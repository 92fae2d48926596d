"""StreamConsumerState's per-message calls in the kernel agree with a plain model of §3.7's rules."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bucketcore.consumer import ConsumerStateError, IndividualAck, StreamConsumerState
from bucketcore.controller import AssignedSegment, Assignment

TOPIC = "segment://t/ns/topic/0000-ffff-{}"


def opened(*segment_ids: int, shared: bool = False) -> StreamConsumerState:
    state = StreamConsumerState()
    ranges = ((0, 0x7FFF), (0x8000, 0xFFFF)) if shared else ()
    segments = tuple(AssignedSegment(s, 0, 0xFFFF, TOPIC.format(s), ranges) for s in segment_ids)
    state.apply(Assignment(1, segments))
    return state


# ops: ("d", id) deliver, ("a", id) ack, ("c", position) cumulative ack
ops = st.lists(
    st.one_of(
        st.tuples(st.just("d"), st.integers(0, 300)),
        st.tuples(st.just("a"), st.integers(0, 300)),
        st.tuples(st.just("c"), st.integers(0, 300)),
    ),
    max_size=400,
)


@settings(max_examples=150, deadline=None)
@given(ops, st.booleans(), st.booleans())
def test_deliveries_and_acks_in_any_order_match_a_set_model(script, as_tuples, shared) -> None:  # type: ignore[no-untyped-def]
    state = opened(5, shared=shared)
    model: set[object] = set()

    def mid(n: int) -> object:
        return (n // 7, n % 7) if as_tuples else n

    for op, n in script:
        m = mid(n)
        if op == "d":
            assert state.delivered(5, m) is (m not in model)
            model.add(m)
        elif op == "a":
            if m in model:
                assert state.acked(5, m) == [IndividualAck(5, (m,))]
                model.discard(m)
            else:
                with pytest.raises(ConsumerStateError, match="not delivered or is already acked"):
                    state.acked(5, m)
        else:
            taken = sorted(x for x in model if x <= m)  # type: ignore[operator]
            commands = state.ack_cumulative({5: m})
            model.difference_update(taken)
            if taken:
                (command,) = commands
                if shared:
                    assert command.message_ids == tuple(taken)
                else:
                    assert command.message_id == taken[-1]
            else:
                assert commands == []
        assert state.unacked(5) == tuple(sorted(model))  # type: ignore[type-var]


def test_a_long_stream_with_a_window_of_unacked_ids_keeps_order_and_count() -> None:
    state = opened(1)
    window = 50
    for i in range(20_000):
        assert state.delivered(1, i) is True
        if i >= window:
            assert state.acked(1, i - window) == [IndividualAck(1, (i - window,))]
    assert state.unacked(1) == tuple(range(20_000 - window, 20_000))


def test_acks_from_the_newest_backwards_and_redeliveries_of_acked_ids() -> None:
    state = opened(1)
    for i in range(1000):
        state.delivered(1, i)
    for i in reversed(range(0, 1000, 2)):
        state.acked(1, i)
    assert state.unacked(1) == tuple(range(1, 1000, 2))
    assert state.delivered(1, 10) is True  # acked before, redelivered: tracked anew
    assert state.delivered(1, 11) is False  # still unacked: tracked once
    assert state.unacked(1)[:7] == (1, 3, 5, 7, 9, 10, 11)


def test_the_kernel_ack_is_the_same_frozen_command_as_a_constructed_one() -> None:
    state = opened(3)
    state.delivered(3, 7)
    (ack,) = state.acked(3, 7)
    assert type(ack) is IndividualAck and ack == IndividualAck(3, (7,)) and hash(ack) == hash(IndividualAck(3, (7,)))
    assert repr(ack) == "IndividualAck(segment_id=3, message_ids=(7,))"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ack.segment_id = 4  # type: ignore[misc]


def test_numpy_ints_and_tuple_subclasses_take_the_checked_path_and_are_stored_as_int() -> None:
    state = opened(2)
    assert state.delivered(np.int64(2), np.uint32(9)) is True
    assert state.delivered(2, 9) is False
    (ack,) = state.acked(2, np.int32(9))
    assert ack == IndividualAck(2, (9,)) and type(ack.message_ids[0]) is int
    with pytest.raises(TypeError, match="segment_id must be an int"):
        state.delivered(True, 1)
    with pytest.raises(ConsumerStateError, match="no open subscription"):
        state.acked(9, 1)
    with pytest.raises(ConsumerStateError, match="no open subscription"):
        state.delivered(9, 1)


def test_the_last_ack_of_a_draining_segment_closes_it_from_the_fast_path() -> None:
    state = opened(1, 2)
    state.delivered(1, 4)
    state.delivered(1, 5)
    actions = state.apply(Assignment(1, (AssignedSegment(2, 0, 0xFFFF, TOPIC.format(2), ()),)))
    assert [type(a).__name__ for a in actions] == ["Drain"]
    with pytest.raises(ConsumerStateError, match="draining"):
        state.delivered(1, 6)
    assert state.acked(1, 4) == [IndividualAck(1, (4,))]
    commands = state.acked(1, 5)
    assert [type(c).__name__ for c in commands] == ["IndividualAck", "Close"]
    assert list(state.subscriptions) == [2]
