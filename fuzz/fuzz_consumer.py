"""StreamConsumerState driven by a fuzzed sequence of operations, differentially against the test
suite's model of the client rules (tests/consumer/test_consumer_state_follows_the_consumer_rules.py: ConsumerLife).

The input picks operations: assignments of fuzzed content (segments shared or exclusive) at older,
equal or newer epochs, re-applying the current assignment, deliveries, single acks and cumulative
position vectors (on open, draining, closed and unknown segments, of delivered and undelivered
messages). The machine checks every command the client emits against what the model says it may
(no ack of an undelivered message, no close before the application acked everything, the
subscription mode of the assignment), its invariant after every operation, and at the end that
the client converges on exactly the assignment once everything is acked.
"""

from __future__ import annotations

import sys

from support import instrumented, main, models_raise_assertions

with instrumented():
    import bucketcore  # noqa: F401  (instrumented before the model imports it)

from test_consumer_state_follows_the_consumer_rules import SEGMENT_IDS, ConsumerLife  # the suite's model and its rules


def test_one_input(data: bytes) -> None:
    """Run one fuzzed operation sequence on a StreamConsumerState and its model."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    machine = ConsumerLife()
    machine.setup()

    def apply() -> None:
        content = {
            fdp.PickValueInList(list(SEGMENT_IDS)): fdp.ConsumeBool() for _ in range(fdp.ConsumeIntInRange(0, 4))
        }
        machine.apply(content=content, delta=fdp.PickValueInList([-1, 0, 0, 1, 2]))

    def reapply() -> None:
        if machine.epoch is not None:  # the rule's precondition
            machine.reapply()

    rules = [
        apply,
        reapply,
        lambda: machine.deliver(
            segment_id=fdp.PickValueInList(list(SEGMENT_IDS)), message_id=fdp.ConsumeIntInRange(0, 30)
        ),
        lambda: machine.ack_one(
            segment_id=fdp.PickValueInList(list(SEGMENT_IDS)), message_id=fdp.ConsumeIntInRange(0, 30)
        ),
        lambda: machine.ack_position(
            vector={
                fdp.PickValueInList(list(SEGMENT_IDS)): fdp.ConsumeIntInRange(0, 31)
                for _ in range(fdp.ConsumeIntInRange(0, 4))
            }
        ),
    ]
    check = models_raise_assertions(machine.matches_the_model)
    for _ in range(fdp.ConsumeIntInRange(0, 60)):
        op = fdp.ConsumeIntInRange(0, 7)
        models_raise_assertions(rules[op if op < 5 else 2])()  # deliveries three times as often
        check()
        if fdp.remaining_bytes() == 0:
            break
    models_raise_assertions(machine.teardown)()


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
