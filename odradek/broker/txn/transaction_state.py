"""Transaction states, their transitions, and what each request gets in each state.

Theory of operation (Kafka's transaction coordinator, KIP-98 with KIP-360's epoch bumps)
---------------------------------------------------------------------------------------
A transactional producer owns a *transactional id*. The id lives in one
``__transaction_state`` partition, ``abs(javaHash(id)) % transaction.state.log.num.partitions``;
the broker leading that partition is its coordinator, and the partition's leader epoch is
the *coordinator epoch* stamped on every marker it writes. Each change of a transaction is
a record in that compacted partition (key: the id; value: producer id and epoch, timeout,
state, partitions, timestamps), written before the change is acknowledged, so a
coordinator that restarts or takes over rebuilds every transaction by replaying it.

1. **InitProducerId** gives the id a producer id and bumps its epoch. The bump is the
   fence: requests carrying an older epoch get PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
   before the versions that know that code), and data or markers with an older epoch are
   refused by the partitions. A transaction left Ongoing by the previous owner is aborted
   first (its epoch is bumped, then it is aborted as below). When the epoch would run out
   (32766) the id gets a new producer id at epoch 0. A producer that passes its current
   id and epoch (v3+) after an error keeps its id: the epoch is bumped (KIP-360); if it
   passes the epoch it had before the last bump, it is a retry and gets the current one.
2. **AddPartitionsToTxn / AddOffsetsToTxn** put partitions into the transaction (the
   group's ``__consumer_offsets`` partition for AddOffsetsToTxn) and make it Ongoing; the
   first one starts the transaction's clock (``transaction.timeout.ms``). Only then may
   the producer write transactional batches to those partitions (Produce checks this
   when ``transaction.partition.verification.enable`` is on).
3. **EndTxn** decides: PrepareCommit or PrepareAbort is written — the commit point — and
   the producer is answered. Then a COMMIT or ABORT *marker* (a control batch carrying
   the producer id, epoch and coordinator epoch) is written to every partition of the
   transaction; a marker closes the producer's open transaction in that partition, moves
   its last stable offset, and for an ABORT adds an entry to the partition's ``.txnindex``.
   When every marker is written, CompleteCommit or CompleteAbort is written and the id is
   ready for its next transaction. Markers that cannot be written yet are retried.
4. A transaction Ongoing longer than its timeout is aborted by the coordinator (epoch
   bumped first, so the late producer is fenced); an id idle in a final state longer
   than ``transactional.id.expiration.ms`` is forgotten (a tombstone).

States (ids as stored in ``TransactionLogValue.TransactionStatus``)
-------------------------------------------------------------------
``Empty`` (0) no transaction; ``Ongoing`` (1) partitions added; ``PrepareCommit`` (2) and
``PrepareAbort`` (3) decided, markers being written; ``CompleteCommit`` (4) and
``CompleteAbort`` (5) done; ``Dead`` (6) expired (never stored: a tombstone is);
``PrepareEpochFence`` (7) in memory only, between the fencing bump and the abort.
"""

from __future__ import annotations

import enum

from odradek.protocol.errors import ErrorCode


class TxnState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    def __str__(self) -> str:
        return self.value[1]


EMPTY = TxnState.EMPTY
ONGOING = TxnState.ONGOING
PREPARE_COMMIT = TxnState.PREPARE_COMMIT
PREPARE_ABORT = TxnState.PREPARE_ABORT
COMPLETE_COMMIT = TxnState.COMPLETE_COMMIT
COMPLETE_ABORT = TxnState.COMPLETE_ABORT
DEAD = TxnState.DEAD
PREPARE_EPOCH_FENCE = TxnState.PREPARE_EPOCH_FENCE

BY_ID = {s.id: s for s in TxnState}
BY_NAME = {str(s): s for s in TxnState}

# The transition table: a state may be entered only from the states listed.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    # InitProducerId: a new epoch (or producer id), no partitions
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    # AddPartitionsToTxn / AddOffsetsToTxn
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    # EndTxn(commit)
    PREPARE_COMMIT: frozenset({ONGOING}),
    # EndTxn(abort), or the abort after a fence (InitProducerId over an Ongoing one, a timeout)
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
    # every marker written
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    # transactional.id.expiration.ms
    DEAD: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    # the epoch bump that fences an Ongoing transaction's producer
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}

COMPLETED = frozenset({COMPLETE_COMMIT, COMPLETE_ABORT})
PREPARED = frozenset({PREPARE_COMMIT, PREPARE_ABORT})
EXPIRABLE = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})


class IllegalTxnTransition(RuntimeError):
    pass


def check_transition(current: TxnState, target: TxnState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTxnTransition(f"a transaction cannot go from {current} to {target}")


# InitProducerId from a producer that is not fenced, by state: "bump" (a new epoch),
# "fence" (abort the open transaction first), or the error to answer.
INIT_ACTION: dict[TxnState, str | ErrorCode] = {
    EMPTY: "bump",
    COMPLETE_COMMIT: "bump",
    COMPLETE_ABORT: "bump",
    ONGOING: "fence",
    PREPARE_COMMIT: ErrorCode.concurrent_transactions,  # markers still being written: retry
    PREPARE_ABORT: ErrorCode.concurrent_transactions,
    PREPARE_EPOCH_FENCE: ErrorCode.concurrent_transactions,
    DEAD: ErrorCode.concurrent_transactions,
}

# AddPartitionsToTxn / AddOffsetsToTxn from the current producer, by state.
ADD_ACTION: dict[TxnState, str | ErrorCode] = {
    EMPTY: "add",
    ONGOING: "add",
    COMPLETE_COMMIT: "add",
    COMPLETE_ABORT: "add",
    PREPARE_COMMIT: ErrorCode.concurrent_transactions,
    PREPARE_ABORT: ErrorCode.concurrent_transactions,
    PREPARE_EPOCH_FENCE: ErrorCode.concurrent_transactions,
    DEAD: ErrorCode.invalid_txn_state,
}

# EndTxn from the current producer, by (state, committed): "prepare" (write PrepareCommit /
# PrepareAbort and send markers), "done" (a retry of what already happened), or an error.
END_ACTION: dict[tuple[TxnState, bool], str | ErrorCode] = {
    (ONGOING, True): "prepare",
    (ONGOING, False): "prepare",
    (PREPARE_COMMIT, True): ErrorCode.concurrent_transactions,
    (PREPARE_COMMIT, False): ErrorCode.invalid_txn_state,
    (PREPARE_ABORT, False): ErrorCode.concurrent_transactions,
    (PREPARE_ABORT, True): ErrorCode.invalid_txn_state,
    (COMPLETE_COMMIT, True): "done",
    (COMPLETE_COMMIT, False): ErrorCode.invalid_txn_state,
    (COMPLETE_ABORT, False): "done",
    (COMPLETE_ABORT, True): ErrorCode.invalid_txn_state,
    (EMPTY, True): ErrorCode.invalid_txn_state,
    (EMPTY, False): ErrorCode.invalid_txn_state,
    (PREPARE_EPOCH_FENCE, True): ErrorCode.concurrent_transactions,
    (PREPARE_EPOCH_FENCE, False): ErrorCode.concurrent_transactions,
    (DEAD, True): ErrorCode.invalid_txn_state,
    (DEAD, False): ErrorCode.invalid_txn_state,
}
