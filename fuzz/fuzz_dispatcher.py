"""The Dispatcher driven by a fuzzed sequence of operations, differentially against the test suite's
model of the dispatch rules (DispatcherMachine and its Model in
tests/dispatch/test_the_dispatcher_agrees_with_a_model_of_the_design.py).

The input picks a dispatchable boundary list, then operations: joins, clean leaves and crashes of
consumers from the model's pool, offers (scalar or column, stamped or by key hash), polls, acks
of delivered entries (a fuzzed subset, scalar or column), acks that must be refused, and offers
of malformed stamps that must be refused without changing anything. The machine's own rules
compare every result with the model, and its invariant (counts, members, owners, paused buckets,
per-consumer and per-bucket stats) is checked after every operation: any divergence is a finding.
"""

from __future__ import annotations

import sys
from typing import Any

from support import expect, instrumented, main, models_raise_assertions

with instrumented():
    import bucketcore as bc

# the suite's model and its rules
from test_the_dispatcher_agrees_with_a_model_of_the_design import POOL, DispatcherMachine

MAX = 0xFFFF


def _splits(fdp: Any) -> tuple[int, ...]:
    # dispatchable: bucket 0 must hold its canonical hash 1, so no first split of 1
    return tuple(sorted({fdp.ConsumeIntInRange(2, MAX) for _ in range(fdp.ConsumeIntInRange(0, 9))}))


def _ack(machine: DispatcherMachine, fdp: Any) -> None:
    """Ack a fuzzed subset of what one consumer received and still holds, as the model says."""
    c = fdp.PickValueInList(POOL)
    model = machine.m
    mine = [e for e in machine.received.get(c, []) if model.state.get(e) == "pending" and model.holder.get(e) == c]
    chosen = [e for e in mine if fdp.ConsumeBool()]
    if not chosen:
        return
    if len(chosen) == 1 and fdp.ConsumeBool():
        count = machine.d.ack(*c, chosen[0])  # the scalar path
    else:
        count = machine.d.ack(*c, chosen)
    expect(count == len(chosen), f"ack of {len(chosen)} entries by {c} returned {count}")
    for e in chosen:
        model.state[e] = "acked"
        del model.holder[e]
        machine.acked.add(e)
    model.forget_if_drained(c)
    model.settle()


def _malformed_offer(machine: DispatcherMachine, fdp: Any) -> None:
    """An offer with a stamp outside 0..0xFFFF or hash_min > hash_max: refused, nothing changes."""
    n = fdp.ConsumeIntInRange(1, 4)
    ids = list(range(machine.next_id, machine.next_id + n))
    lo = [fdp.ConsumeIntInRange(0, MAX) for _ in ids]
    hi = list(lo)
    bad = fdp.ConsumeIntInRange(0, n - 1)
    if fdp.ConsumeBool():
        lo[bad] = fdp.PickValueInList([-1, MAX + 1, 2**40])
    else:
        lo[bad], hi[bad] = MAX, fdp.ConsumeIntInRange(0, MAX - 1)
    before = (machine.d.offered_entries, machine.d.pending_entries, machine.d.queued_entries)
    try:
        machine.d.offer(ids, hash_min=lo, hash_max=hi)
    except (bc.MalformedStampError, ValueError):
        pass
    else:
        raise AssertionError(f"offer accepted a malformed stamp at {bad}: {lo!r} / {hi!r}")
    after = (machine.d.offered_entries, machine.d.pending_entries, machine.d.queued_entries)
    expect(after == before, f"a refused offer changed the dispatcher: {before} -> {after}")


def test_one_input(data: bytes) -> None:
    """Run one fuzzed operation sequence on a Dispatcher and its model."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    machine = DispatcherMachine()
    machine.setup(splits=_splits(fdp))
    rules = {
        0: lambda: machine.join(c=fdp.PickValueInList(POOL)),
        1: lambda: machine.leave(c=fdp.PickValueInList(POOL)),
        2: lambda: machine.crash(c=fdp.PickValueInList(POOL)),
        3: lambda: machine.offer(
            hashes=[fdp.ConsumeIntInRange(0, MAX) for _ in range(fdp.ConsumeIntInRange(1, 6))],
            scalar=fdp.ConsumeBool(),
            unstamped=fdp.ConsumeBool(),
        ),
        4: machine.poll,
        5: lambda: _ack(machine, fdp),
        6: lambda: machine.bad_ack(c=fdp.PickValueInList(POOL), e=fdp.ConsumeIntInRange(0, 60)),
        7: lambda: _malformed_offer(machine, fdp),
    }
    check = models_raise_assertions(machine.same_counts_and_members)
    for _ in range(fdp.ConsumeIntInRange(0, 60)):
        op = fdp.ConsumeIntInRange(0, 9)
        models_raise_assertions(rules[op if op < 8 else op - 5])()  # offers and polls twice as often
        check()
        if fdp.remaining_bytes() == 0:
            break


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
