"""simulate's checks can fail: injected faults are caught, and the checks themselves are exact."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from bucketcore.cli import build_parser
from bucketcore.cli import simulate as simulate_cmd
from bucketcore.harness import key_workload
from bucketcore.harness.checks import EventLog, run_checks
from bucketcore.harness.simulator import FAULTS, SimConfig, simulate

SMALL = ["--messages", "20000", "--keys", "2000", "--chunk", "1000"]


def run_simulate(extra: list[str], faults: tuple[str, ...] = ()) -> tuple[int, str]:
    args = build_parser().parse_args(["simulate", *SMALL, *extra])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = simulate_cmd.run(args, _faults=faults)
    return status, out.getvalue()


# which check each fault must trip
FAULT_CHECK = {
    "consumer_out_of_order": "order_violations",  # a consumer that processes and acks newest first
    "skip_drain": "order_violations",  # a hand-off that gives a bucket away before its holder acked
    "store_drops_entry": "lost",  # a store that loses appended entries
    "store_duplicates_entry": "duplicated_after_ack",  # a store that commits some entries twice
    "dispatcher_misses_join": "misrouted_entries",  # a broker that loses a sharer's join
}


def test_every_fault_has_a_check() -> None:
    assert set(FAULT_CHECK) == FAULTS


@pytest.mark.parametrize("fault", sorted(FAULT_CHECK))
def test_an_injected_fault_is_reported_and_the_exit_status_is_1(fault: str) -> None:
    status, text = run_simulate(["--json"], (fault,))
    data = json.loads(text)
    assert status == 1
    assert data["ok"] is False
    assert data["checks"][FAULT_CHECK[fault]] > 0
    first = {"order_violations": "first_violation", "lost": "first_lost", "duplicated_after_ack": "first_duplicate"}
    if FAULT_CHECK[fault] in first:
        assert 0 <= data["checks"][first[FAULT_CHECK[fault]]] < 20000


def test_the_text_report_says_fail_for_a_fault() -> None:
    status, text = run_simulate(["--churn", "4"], ("store_drops_entry",))
    assert status == 1
    assert "result: FAIL" in text
    assert "FAIL (first: message" in text


def test_the_same_seed_gives_the_same_report_and_another_seed_does_not() -> None:
    w = key_workload("zipf", 15000, keys=1500, seed=7)
    cfg = SimConfig(chunk=1000, seed=7, churn=8)
    a, b = simulate(w, cfg), simulate(w, cfg)
    assert a.ok and b.ok
    fields = (
        "produced",
        "entries",
        "delivered_entries",
        "redelivered_entries",
        "paused_bucket_ticks",
        "ticks",
        "events",
        "consumers",
    )
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    c = simulate(w, SimConfig(chunk=1000, seed=8, churn=8))
    assert [getattr(a, f) for f in fields] != [getattr(c, f) for f in fields]


def test_per_bucket_policy_and_many_consumers_still_pass() -> None:
    status, text = run_simulate(["--policy", "per_bucket", "--consumers", "40", "--buckets", "4", "--json"])
    data = json.loads(text)
    assert status == 0 and data["ok"]
    assert data["produced"] == data["consumed"]


def test_an_unknown_fault_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        simulate(key_workload("uuid", 10, keys=5), SimConfig(), _faults=("gremlins",))


# -- the checks on hand-made records ---------------------------------------------------------------


def _log(*entries: tuple[list[int], int]) -> EventLog:
    log = EventLog()
    for msgs, clock in entries:
        log.add(np.asarray(msgs, dtype=np.int64), clock)
    return log


KEYS = np.array([0, 0, 1, 0, -1])  # messages 0, 1, 3 of key 0; 2 of key 1; 4 keyless
SEQ = np.array([0, 1, 0, 2, -1])


def test_checks_pass_on_a_clean_record() -> None:
    everyone = ([0, 1, 2, 3, 4], 1)
    res = run_checks(5, KEYS, SEQ, _log(everyone), _log(([0, 1, 2, 3, 4], 2)), _log(([0, 1, 2, 3, 4], 3)))
    assert res.ok and res.consumed == 5


def test_checks_count_a_key_processed_out_of_order() -> None:
    delivered = _log(([3], 1), ([0, 1], 2))
    processed = _log(([3], 3), ([0, 1, 2, 4], 4))  # message 3 (seq 2) before 0 and 1 of its key
    acked = _log(([0, 1, 2, 3, 4], 5))
    res = run_checks(5, KEYS, SEQ, delivered, processed, acked)
    assert res.order_violations == 1 and res.first_violation == 0
    assert res.lost == 0 and res.duplicated_after_ack == 0


def test_checks_count_lost_messages() -> None:
    all_msgs = ([0, 1, 2, 3, 4], 1)
    res = run_checks(5, KEYS, SEQ, _log(all_msgs), _log(([0, 1, 2, 3, 4], 2)), _log(([0, 1, 3], 3)))
    assert res.lost == 2 and res.first_lost == 2 and res.consumed == 3


def test_a_crash_redelivery_is_not_a_duplicate_but_a_delivery_after_ack_is() -> None:
    # message 0 delivered twice before any ack (crash redelivery), acked once: fine
    ok = run_checks(
        5, KEYS, SEQ, _log(([0, 1, 2, 3, 4], 1), ([0], 2)), _log(([0, 1, 2, 3, 4], 3)), _log(([0, 1, 2, 3, 4], 4))
    )
    assert ok.ok
    # message 2 delivered again after its ack, and message 4 acked twice
    bad = run_checks(
        5,
        KEYS,
        SEQ,
        _log(([0, 1, 2, 3, 4], 1), ([2], 5)),
        _log(([0, 1, 2, 3, 4], 2)),
        _log(([0, 1, 2, 3, 4], 3), ([4], 6)),
    )
    assert bad.duplicated_after_ack == 2 and bad.first_duplicate == 2
