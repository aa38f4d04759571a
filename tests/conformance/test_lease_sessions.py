"""The session path (core.rules.fence.grant_lease): a lease whose holder's session ended may be
taken before its expiry, with the next token; a live holder's never is; a waiting standby is
woken when the session ends; member rows are never watched."""

from __future__ import annotations

import threading
import time

import pytest

from goatbeat_celery.core.rules.shards import member_lease_name
from goatbeat_celery.core.types.errors import LeaseLost
from goatbeat_celery.core.types.lease import LeaseGrant

from .conftest import Backend, Store
from .support import LONG_TTL, claim_next, create_due

#: How long the database (or the kernel) may take to let go of a closed session's locks on a
#: busy two-core machine: the server ends the backend after the client's goodbye, a moment
#: later. Far below LONG_TTL, so that a take-over within it is the session path, not expiry.
SESSION_END = 10.0


def taken_after_end(store: Store, name: str, holder: str) -> LeaseGrant:
    """``holder``'s grant of ``name``, asked again until the ended session's lock is let go."""
    deadline = time.monotonic() + SESSION_END
    while True:
        grant = store.acquire(name, holder, LONG_TTL)
        if grant is not None:
            return grant
        assert time.monotonic() < deadline, "the ended session's lease was never taken"
        store.wait(0.2)


def test_a_lease_whose_holder_session_ended_is_taken_before_its_expiry(
        backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    old = peer.acquire("beat", "a", LONG_TTL)
    assert old is not None
    assert store.acquire("beat", "b", LONG_TTL) is None

    ended = store.now()
    backend.end_session(peer, "a")
    grant = taken_after_end(store, "beat", "b")

    assert (grant.holder, grant.token, grant.changed_holder) == ("b", old.token + 1, True)
    assert store.now() < old.expires_at, "taken by expiry, not by the session's end"
    info = store.inspect("beat")
    assert info is not None and (info.holder, info.previous_holder) == ("b", "a")
    assert info.changed_at is not None and ended <= info.changed_at < old.expires_at


def test_the_old_holders_token_is_refused_once_its_lease_was_taken_early(
        backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    planned = claim_next(create_due(store, "report"))
    old = peer.acquire("beat", "a", LONG_TTL)
    assert old is not None and store.acquire("beat", "b", LONG_TTL) is None
    backend.end_session(peer, "a")
    taken_after_end(store, "beat", "b")

    with pytest.raises(LeaseLost):
        store.claim([planned], lease=old)
    assert store.executions() == []


def test_a_live_holders_lease_is_not_taken_while_another_store_waits(
        backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    held = peer.acquire("beat", "a", LONG_TTL)
    assert held is not None
    assert store.acquire("beat", "b", LONG_TTL) is None

    store.wait(0.3)  # a standby's wait: nothing ended

    assert store.acquire("beat", "b", LONG_TTL) is None
    renewed = peer.acquire("beat", "a", LONG_TTL)
    assert renewed is not None and renewed.token == held.token
    info = store.list_leases("beat")[0]
    assert info.held and not info.session_gone


def test_a_waiting_standby_is_woken_when_the_holder_session_ends(backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    assert peer.acquire("beat", "a", LONG_TTL) is not None
    assert store.acquire("beat", "b", LONG_TTL) is None  # refused: the store watches now
    store.wait(0.01)  # a first wait may return at once (PostgreSQL starts to LISTEN)

    started = time.monotonic()
    # Ended while the standby waits, as a crash comes.
    ending = threading.Timer(0.1, backend.end_session, (peer, "a"))
    ending.start()
    try:
        woken = store.wait(SESSION_END)
    finally:
        ending.join()

    assert woken and time.monotonic() - started < SESSION_END
    [info] = store.list_leases("beat")
    assert info.session_gone and not info.held


def test_a_released_lease_leaves_no_lock_behind_for_its_next_holder(backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    first = peer.acquire("beat", "a", LONG_TTL)
    assert first is not None and peer.release(first)
    second = store.acquire("beat", "b", LONG_TTL)
    assert second is not None and second.token == first.token + 1

    # The first holder, still running, asks again: refused, as from any live holder.
    assert peer.acquire("beat", "a", LONG_TTL) is None
    assert store.acquire("beat", "b", LONG_TTL) is not None


def test_member_rows_are_never_taken_early(backend: Backend) -> None:
    store, peer = backend.store, backend.open_peer()
    member = member_lease_name("beat", 2, "a")
    assert peer.acquire(member, "a", LONG_TTL) is not None
    backend.end_session(peer, "a")
    store.wait(0.3)

    assert store.acquire(member, "b", LONG_TTL) is None
