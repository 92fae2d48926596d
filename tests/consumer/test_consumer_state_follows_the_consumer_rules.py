"""StreamConsumerState (docs/design.md, "Consumer rules"): mode selection, drains, ack translation,
idempotence; and its per-message calls (compiled) agree with a plain model of the same rules."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bucketcore import StaleLayoutError
from bucketcore.consumer import (
    Close,
    ConsumerStateError,
    CumulativeAck,
    Drain,
    IndividualAck,
    StreamConsumerState,
    Subscribe,
)
from bucketcore.controller import AssignedSegment, Assignment

FULL = 0xFFFF


def ranges_of(splits: list[int]) -> tuple[tuple[int, int], ...]:
    """Independent construction of a boundary list's inclusive ranges (docs/design.md, "Boundary lists")."""
    starts = [0, *splits]
    ends = [s - 1 for s in splits] + [FULL]
    return tuple(zip(starts, ends, strict=False))


def seg(segment_id: int, shared_splits: list[int] | None = None, start: int = 0, end: int = FULL) -> AssignedSegment:
    topic = f"segment://t/ns/topic/{start:04x}-{end:04x}-{segment_id}"
    return AssignedSegment(segment_id, start, end, topic, ranges_of(shared_splits) if shared_splits is not None else ())


N4 = [0x4000, 0x8000, 0xC000]


def test_sole_owner_subscribes_exclusive() -> None:
    state = StreamConsumerState()
    actions = state.apply(Assignment(1, (seg(7),)))
    assert actions == [Subscribe(7, "segment://t/ns/topic/0000-ffff-7", "Exclusive")]
    (sub,) = actions
    assert sub.hash_ranges == () and sub.key_shared_mode is None and sub.entry_bucket_dispatch is False
    assert state.epoch == 1 and state.subscriptions == {7: sub}


def test_shared_segment_subscribes_key_shared_sticky_with_flag_and_exact_list() -> None:
    state = StreamConsumerState()
    (sub,) = state.apply(Assignment(1, (seg(3, N4),)))
    assert sub.subscription_type == "Key_Shared"
    assert sub.key_shared_mode == "STICKY"
    assert sub.entry_bucket_dispatch is True
    assert sub.hash_ranges == ((0, 0x3FFF), (0x4000, 0x7FFF), (0x8000, 0xBFFF), (0xC000, 0xFFFF))


def test_reapplying_unchanged_assignment_does_nothing() -> None:
    state = StreamConsumerState()
    assignment = Assignment(4, (seg(1, N4, 0, 0x7FFF), seg(2, None, 0x8000, FULL)))
    state.apply(assignment)
    state.delivered(1, 10)
    before = (state.subscriptions, state.draining, state.unacked(1))
    assert state.apply(assignment) == []
    # same content, other segment order, rebuilt objects: still nothing
    assert state.apply(Assignment(4, tuple(reversed(assignment.segments)))) == []
    assert (state.subscriptions, state.draining, state.unacked(1)) == before


def test_older_epoch_ignored_same_epoch_applied() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(5, (seg(1),)))
    assert state.apply(Assignment(4, (seg(2),))) == []
    assert state.epoch == 5 and list(state.subscriptions) == [1]
    # Membership changes do not bump the layout epoch: same-epoch new content is applied.
    actions = state.apply(Assignment(5, (seg(1), seg(2, None, 0, 0x10))))
    assert actions == [Subscribe(2, "segment://t/ns/topic/0000-0010-2", "Exclusive")]


def test_flip_with_nothing_delivered_completes_at_once() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    actions = state.apply(Assignment(1, (seg(1, N4),)))
    assert actions == [Drain(1, "mode_flip"), Close(1), Subscribe.for_segment(seg(1, N4))]
    assert state.draining == {}


def test_flip_waits_for_application_acks_and_never_acks_on_its_behalf() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    for message_id in (3, 5, 8):
        state.delivered(1, message_id)
    actions = state.apply(Assignment(2, (seg(1, N4),)))
    assert actions == [Drain(1, "mode_flip")]  # no ack, no close yet
    assert state.draining == {1: "mode_flip"}
    with pytest.raises(ConsumerStateError, match="draining"):
        state.delivered(1, 9)
    assert state.ack_cumulative({1: 5}) == [CumulativeAck(1, 5)]  # still exclusive while draining
    assert state.draining == {1: "mode_flip"}
    assert state.acked(1, 8) == [IndividualAck(1, (8,)), Close(1), Subscribe.for_segment(seg(1, N4))]
    assert state.subscriptions[1].shared and state.unacked(1) == ()


def test_removal_drains_then_closes() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4), seg(2, None, 0, 5))))
    state.delivered(1, 4)
    state.delivered(1, 2)
    assert state.apply(Assignment(1, (seg(2, None, 0, 5),))) == [Drain(1, "removed")]
    assert state.ack_cumulative({1: 100, 2: 100}) == [IndividualAck(1, (2, 4)), Close(1)]
    assert list(state.subscriptions) == [2]
    with pytest.raises(ConsumerStateError, match="no open subscription"):
        state.delivered(1, 5)


def test_flip_back_during_drain_resubscribes_after_close() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    state.delivered(1, 1)
    assert state.apply(Assignment(1, (seg(1, N4),))) == [Drain(1, "mode_flip")]
    assert state.apply(Assignment(1, (seg(1),))) == []  # drain runs on
    assert state.acked(1, 1) == [IndividualAck(1, (1,)), Close(1), Subscribe.for_segment(seg(1))]


def test_shared_cumulative_ack_is_individual_acks_of_exactly_the_delivered() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4),)))
    for message_id in ((1, 0, -1), (1, 2, 0), (1, 2, 1), (2, 0, -1), (2, 5, -1)):
        state.delivered(1, message_id)
    state.acked(1, (1, 2, 0))
    assert state.ack_cumulative({1: (2, 0, -1)}) == [IndividualAck(1, ((1, 0, -1), (1, 2, 1), (2, 0, -1)))]
    assert state.ack_cumulative({1: (2, 0, -1)}) == []
    assert state.unacked(1) == ((2, 5, -1),)


def test_exclusive_cumulative_ack_goes_to_greatest_delivered_at_or_before_position() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    for message_id in (10, 20, 30):
        state.delivered(1, message_id)
    assert state.ack_cumulative({1: 5}) == []
    assert state.ack_cumulative({1: 25}) == [CumulativeAck(1, 20)]  # never 25: it was not delivered
    assert state.unacked(1) == (30,)


def test_positions_of_closed_or_unknown_segments_are_ignored() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    assert state.ack_cumulative({99: 4, 1: 0}) == []


def test_redelivery_is_tracked_once() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    assert state.delivered(1, np.int64(4)) is True
    assert state.delivered(1, 4) is False
    assert state.unacked(1) == (4,)
    assert state.acked(1, 4) == [IndividualAck(1, (4,))]
    with pytest.raises(ConsumerStateError, match="not delivered or is already acked"):
        state.acked(1, 4)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: s.acked(1, 99), ConsumerStateError, "message 99 on segment 1 was not delivered"),
        (lambda s: s.acked(5, 1), ConsumerStateError, "segment 5 has no open subscription"),
        (lambda s: s.delivered(5, 1), ConsumerStateError, "segment 5 has no open subscription"),
        (lambda s: s.delivered(1, True), TypeError, "message_id must be an int"),
        (lambda s: s.delivered(1, 1.0), TypeError, "message_id must be an int"),
        (lambda s: s.delivered(1, ()), TypeError, "non-empty tuple"),
        (lambda s: s.delivered(1, (1, 2.5)), TypeError, "part 1 must be an int"),
        (lambda s: s.delivered(1, (1, 2)), TypeError, "must be an int like the ids already delivered"),
        (lambda s: s.delivered(True, 1), TypeError, "segment_id must be an int"),
        (lambda s: s.delivered(-1, 1), ValueError, "segment_id must be >= 0"),
        (lambda s: s.ack_cumulative([(1, 2)]), TypeError, "position_vector must be a mapping"),
        (lambda s: s.ack_cumulative({1: "x"}), TypeError, "position for segment 1"),
        (lambda s: s.ack_cumulative({1: (1, 1)}), TypeError, "position"),
        (lambda s: s.ack_cumulative({1.0: 3}), TypeError, "position_vector key"),
        (lambda s: s.apply({"layout_epoch": 1}), TypeError, "Assignment"),
    ],
)
def test_bad_input_is_rejected_clearly_without_change(call, error, match) -> None:  # type: ignore[no-untyped-def]
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1),)))
    state.delivered(1, 3)
    with pytest.raises(error, match=match):
        call(state)
    assert state.unacked(1) == (3,) and list(state.subscriptions) == [1]


def test_a_changed_boundary_list_or_range_is_a_stale_layout() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4),)))
    with pytest.raises(StaleLayoutError, match="immutable"):
        state.apply(Assignment(2, (seg(1, [0x8000]),)))
    with pytest.raises(StaleLayoutError, match="range and topic never change"):
        state.apply(Assignment(2, (seg(1, N4, 0, 0x7FFF),)))
    assert state.epoch == 1 and state.subscriptions == {1: Subscribe.for_segment(seg(1, N4))}


def test_subscribe_rejects_inconsistent_fields() -> None:
    with pytest.raises(ValueError, match="Exclusive"):
        Subscribe(1, "t", "Exclusive", ((0, FULL),))
    with pytest.raises(ValueError, match="STICKY"):
        Subscribe(1, "t", "Key_Shared", ((0, FULL),), "STICKY", False)
    with pytest.raises(ValueError, match="subscription_type"):
        Subscribe(1, "t", "Shared")


# --- property test: a random client life, checked against a model of what it was told -------------


SEGMENT_IDS = (0, 1, 2, 3)


SPLITS = {0: [0x8000], 1: N4, 2: [21845, 43690], 3: [1, 2, 3, 0xFFFF]}


SPANS = {0: (0, 0x3FFF), 1: (0x4000, 0x7FFF), 2: (0x8000, 0xBFFF), 3: (0xC000, FULL)}


def make_segment(segment_id: int, shared: bool) -> AssignedSegment:
    start, end = SPANS[segment_id]
    return seg(segment_id, SPLITS[segment_id] if shared else None, start, end)


assignment_content = st.dictionaries(st.sampled_from(SEGMENT_IDS), st.booleans(), max_size=4)


class ConsumerLife(RuleBasedStateMachine):
    """The model records only what the commands told the client; every command is checked against it."""

    @initialize()
    def setup(self) -> None:
        self.state = StreamConsumerState()
        self.epoch: int | None = None
        self.desired: dict[int, AssignedSegment] = {}
        self.open: dict[int, Subscribe] = {}  # what the client has subscribed and not closed
        self.draining: set[int] = set()
        self.outstanding: dict[int, set[int]] = {}  # delivered to the app, no ack sent yet
        self.deliveries: dict[tuple[int, int], int] = {}
        self.acks: dict[tuple[int, int], int] = {}

    # -- checking the commands ----------------------------------------------------------------
    def ack_ids(self, segment_id: int, ids: set[int]) -> None:
        for message_id in ids:
            self.acks[(segment_id, message_id)] = self.acks.get((segment_id, message_id), 0) + 1
            # never more acks of a message than deliveries of it: no undelivered or double ack
            assert self.acks[(segment_id, message_id)] <= self.deliveries.get((segment_id, message_id), 0)
        self.outstanding[segment_id] -= ids

    def execute(self, commands: list) -> None:  # type: ignore[type-arg]
        for command in commands:
            sid = command.segment_id
            if isinstance(command, Subscribe):
                assert sid not in self.open, "subscribe on a segment that is still open"
                assert command == Subscribe.for_segment(self.desired[sid])
                if command.shared:
                    assert command.hash_ranges == self.desired[sid].bucket_ranges
                    assert command.key_shared_mode == "STICKY" and command.entry_bucket_dispatch
                self.open[sid] = command
                self.outstanding[sid] = set()
            elif isinstance(command, Drain):
                assert sid in self.open and sid not in self.draining
                self.draining.add(sid)
            elif isinstance(command, Close):
                assert sid in self.draining, "close without a drain"
                assert not self.outstanding[sid], "close with unacked deliveries"
                del self.open[sid]
                self.draining.discard(sid)
            elif isinstance(command, IndividualAck):
                ids = set(command.message_ids)
                assert list(command.message_ids) == sorted(ids) and ids
                assert ids <= self.outstanding[sid], "ack of an undelivered or acked message"
                self.ack_ids(sid, ids)
            elif isinstance(command, CumulativeAck):
                assert not self.open[sid].shared, "cumulative ack on a Key_Shared segment"
                assert command.message_id in self.outstanding[sid]
                self.ack_ids(sid, {m for m in self.outstanding[sid] if m <= command.message_id})
            else:  # pragma: no cover
                raise AssertionError(f"unknown command {command!r}")

    # -- rules --------------------------------------------------------------------------------
    @rule(content=assignment_content, delta=st.sampled_from([-1, 0, 0, 1, 2]))
    def apply(self, content: dict[int, bool], delta: int) -> None:
        epoch = max(0, (self.epoch or 0) + delta)
        assignment = Assignment(epoch, tuple(make_segment(s, shared) for s, shared in sorted(content.items())))
        commands = self.state.apply(assignment)
        if self.epoch is not None and epoch < self.epoch:
            assert commands == []
            return
        assert not any(isinstance(c, (IndividualAck, CumulativeAck)) for c in commands)
        self.epoch = epoch
        self.desired = {s.segment_id: s for s in assignment.segments}
        self.execute(commands)
        assert self.state.apply(assignment) == []  # idempotent right away

    @precondition(lambda self: self.epoch is not None)
    @rule()
    def reapply(self) -> None:
        current = self.state.assignment
        assert current is not None
        assert self.state.apply(Assignment(current.layout_epoch, tuple(reversed(current.segments)))) == []

    @rule(segment_id=st.sampled_from(SEGMENT_IDS), message_id=st.integers(0, 30))
    def deliver(self, segment_id: int, message_id: int) -> None:
        if segment_id not in self.open or segment_id in self.draining:
            with pytest.raises(ConsumerStateError):
                self.state.delivered(segment_id, message_id)
            return
        fresh = self.state.delivered(segment_id, message_id)
        assert fresh == (message_id not in self.outstanding[segment_id])
        if fresh:
            self.deliveries[(segment_id, message_id)] = self.deliveries.get((segment_id, message_id), 0) + 1
            self.outstanding[segment_id].add(message_id)

    @rule(segment_id=st.sampled_from(SEGMENT_IDS), message_id=st.integers(0, 30))
    def ack_one(self, segment_id: int, message_id: int) -> None:
        if message_id not in self.outstanding.get(segment_id, set()) or segment_id not in self.open:
            with pytest.raises(ConsumerStateError):
                self.state.acked(segment_id, message_id)
            return
        commands = self.state.acked(segment_id, message_id)
        assert commands[0] == IndividualAck(segment_id, (message_id,))
        self.execute(commands)

    @rule(vector=st.dictionaries(st.sampled_from(SEGMENT_IDS), st.integers(0, 31), max_size=4))
    def ack_position(self, vector: dict[int, int]) -> None:
        expected = {
            sid: {m for m in self.outstanding[sid] if m <= pos}
            for sid, pos in vector.items()
            if sid in self.open and any(m <= pos for m in self.outstanding[sid])
        }
        commands = self.state.ack_cumulative(vector)
        acked = {c.segment_id for c in commands if isinstance(c, (IndividualAck, CumulativeAck))}
        assert acked == set(expected)
        for command in commands:
            if isinstance(command, IndividualAck):
                assert set(command.message_ids) == expected[command.segment_id]
            elif isinstance(command, CumulativeAck):
                assert command.message_id == max(expected[command.segment_id])
        self.execute(commands)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def matches_the_model(self) -> None:
        if not hasattr(self, "state"):
            return
        assert self.state.subscriptions == dict(sorted(self.open.items()))
        assert set(self.state.draining) == self.draining
        for sid in self.open:
            assert self.state.unacked(sid) == tuple(sorted(self.outstanding[sid]))
        # every non-draining open segment is in its assigned mode; every assigned one is open
        for sid, sub in self.open.items():
            if sid not in self.draining:
                assert sid in self.desired and sub == Subscribe.for_segment(self.desired[sid])
        assert set(self.desired) <= set(self.open)

    def teardown(self) -> None:
        if not hasattr(self, "state"):
            return
        # Once the application acks everything, every drain completes and the client converges
        # on exactly the assignment.
        self.execute(self.state.ack_cumulative({sid: 10**6 for sid in SEGMENT_IDS}))
        assert not self.draining
        assert self.open == {sid: Subscribe.for_segment(s) for sid, s in self.desired.items()}


TestConsumerLife = ConsumerLife.TestCase


TestConsumerLife.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@settings(max_examples=200, deadline=None)
@given(
    delivered=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(-1, 3)), unique=True, max_size=30),
    position=st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(-1, 3)),
    shared=st.booleans(),
)
def test_cumulative_translation_against_a_slow_reference(delivered, position, shared) -> None:  # type: ignore[no-untyped-def]
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4 if shared else None),)))
    for message_id in delivered:
        state.delivered(1, message_id)
    below = sorted(m for m in delivered if m <= position)  # tuple order = (ledger, entry, batch) order
    commands = state.ack_cumulative({1: position})
    if not below:
        assert commands == []
    elif shared:
        assert commands == [IndividualAck(1, tuple(below))]
    else:
        assert commands == [CumulativeAck(1, below[-1])]
    assert state.unacked(1) == tuple(sorted(m for m in delivered if m > position))


def test_controller_to_clients_as_a_second_consumer_joins_and_leaves() -> None:
    from bucketcore import Buckets, Segment, TopicLayout, compute_assignment
    from bucketcore.dispatch import EntryBucketSelector

    layout = TopicLayout(3, [Segment(0, 0, FULL, Buckets.equal_width(4))])
    clients = {"a": StreamConsumerState(), "b": StreamConsumerState()}
    exclusive = Subscribe(0, "segment://t/ns/topic/0000-ffff-0", "Exclusive")
    shared = Subscribe(0, "segment://t/ns/topic/0000-ffff-0", "Key_Shared", ranges_of(N4), "STICKY", True)

    assert clients["a"].apply(compute_assignment(layout, ["a"])["a"]) == [exclusive]
    clients["a"].delivered(0, 1)
    clients["a"].delivered(0, 2)

    both = compute_assignment(layout, ["b", "a"])
    assert clients["a"].apply(both["a"]) == [Drain(0, "mode_flip")]  # two deliveries still unacked
    assert clients["b"].apply(both["b"]) == [shared]
    assert clients["a"].ack_cumulative({0: 2}) == [CumulativeAck(0, 2), Close(0), shared]
    # both sharers declare the same list; the broker accepts it and spreads halves
    selector = EntryBucketSelector(Buckets(N4))
    for name, client in clients.items():
        declared = client.subscriptions[0].hash_ranges
        selector.validate(tuple(start for start, _ in declared[1:]))
        selector.add_consumer(name, ord(name))
    assert [owner[0] for owner in selector.owners()] == ["a", "a", "b", "b"]
    assert clients["a"].subscriptions == clients["b"].subscriptions == {0: shared}

    alone = compute_assignment(layout, ["b"])
    assert clients["b"].apply(alone["b"]) == [Drain(0, "mode_flip"), Close(0), exclusive]
    assert clients["a"].apply(Assignment(3, ())) == [Drain(0, "removed"), Close(0)]
    assert clients["a"].subscriptions == {}


ops = st.lists(
    st.one_of(
        st.tuples(st.just("run"), st.integers(0, 400), st.integers(1, 200)),
        st.tuples(st.just("ack"), st.integers(0, 460)),
        st.tuples(st.just("ack_range"), st.integers(0, 460), st.integers(0, 400)),
        st.tuples(st.just("cum"), st.integers(0, 460)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=ops, shared=st.booleans())
def test_unacked_tracking_against_a_plain_set(ops, shared) -> None:  # type: ignore[no-untyped-def]
    """Bulk, out-of-order and repeated deliveries with scattered acks (tombstones, compaction)."""
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4 if shared else None),)))
    model: set[int] = set()
    for op in ops:
        if op[0] == "run":
            for message_id in range(op[1], op[1] + op[2]):
                assert state.delivered(1, message_id) == (message_id not in model)
                model.add(message_id)
        elif op[0] == "ack":
            if op[1] in model:
                assert state.acked(1, op[1]) == [IndividualAck(1, (op[1],))]
                model.remove(op[1])
            else:
                with pytest.raises(ConsumerStateError):
                    state.acked(1, op[1])
        elif op[0] == "ack_range":
            for message_id in sorted(m for m in model if op[1] <= m <= op[1] + op[2]):
                state.acked(1, message_id)
                model.remove(message_id)
        else:
            below = sorted(m for m in model if m <= op[1])
            expected = [] if not below else [IndividualAck(1, tuple(below)) if shared else CumulativeAck(1, below[-1])]
            assert state.ack_cumulative({1: op[1]}) == expected
            model.difference_update(below)
        assert state.unacked(1) == tuple(sorted(model))


def test_tracking_after_many_scattered_acks_and_redeliveries() -> None:
    state = StreamConsumerState()
    state.apply(Assignment(1, (seg(1, N4),)))
    for message_id in range(1000):
        state.delivered(1, message_id)
    for message_id in range(1, 900):  # the oldest stays unacked: acked ids pile up behind it
        state.acked(1, message_id)
    assert state.unacked(1) == (0, *range(900, 1000))
    assert state.delivered(1, 500) is True  # a redelivery after its ack is tracked again
    assert state.delivered(1, 950) is False
    assert state.ack_cumulative({1: 949}) == [IndividualAck(1, (0, 500, *range(900, 950)))]
    assert state.unacked(1) == tuple(range(950, 1000))


# --------------------------------------------------------------------------------------------
# the per-message calls (deliver, ack) against a plain set model


TOPIC = "segment://t/ns/topic/0000-ffff-{}"


def opened(*segment_ids: int, shared: bool = False) -> StreamConsumerState:
    state = StreamConsumerState()
    ranges = ((0, 0x7FFF), (0x8000, 0xFFFF)) if shared else ()
    segments = tuple(AssignedSegment(s, 0, 0xFFFF, TOPIC.format(s), ranges) for s in segment_ids)
    state.apply(Assignment(1, segments))
    return state


# ("d", id) deliver, ("a", id) ack, ("c", position) cumulative ack
per_message_ops = st.lists(
    st.one_of(
        st.tuples(st.just("d"), st.integers(0, 300)),
        st.tuples(st.just("a"), st.integers(0, 300)),
        st.tuples(st.just("c"), st.integers(0, 300)),
    ),
    max_size=400,
)


@settings(max_examples=150, deadline=None)
@given(per_message_ops, st.booleans(), st.booleans())
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
