"""LeaseManager: one holder at a time, a fencing token that grows with each new holder, and
expiry judged by the store's clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from goatbeat_celery.core.types.errors import LeaseLost

from .conftest import Backend, Store, StoreClock
from .support import LONG_TTL, claim_next, create_due, run_together, snapshot


def test_a_lease_never_taken_has_no_row(store: Store) -> None:
    assert store.inspect("beat") is None


def test_the_first_grant_has_token_one_and_is_visible(store: Store) -> None:
    before = store.now()
    grant = store.acquire("beat", "a", LONG_TTL)
    after = store.now()

    assert grant is not None
    assert (grant.name, grant.holder, grant.token, grant.changed_holder) == ("beat", "a", 1, True)
    assert before + LONG_TTL <= grant.expires_at <= after + LONG_TTL
    info = store.inspect("beat")
    assert info is not None
    assert (info.holder, info.token, info.expires_at, info.held) == ("a", 1, grant.expires_at,
                                                                     True)


def test_renewal_by_the_same_holder_keeps_the_token(store: Store, clock: StoreClock) -> None:
    first = store.acquire("beat", "a", LONG_TTL)
    assert first is not None
    clock.advance(0.05)

    renewed = store.acquire("beat", "a", LONG_TTL)

    assert renewed is not None
    assert (renewed.token, renewed.changed_holder) == (1, False)
    assert renewed.expires_at > first.expires_at


def test_a_live_lease_cannot_be_taken_by_another_holder(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None

    assert store.acquire("beat", "b", LONG_TTL) is None

    info = store.inspect("beat")
    assert info is not None
    assert (info.holder, info.token, info.expires_at) == ("a", 1, grant.expires_at)


def test_a_holder_change_increments_the_token(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    first = store.acquire("beat", "a", ttl)
    assert first is not None
    clock.move_to(first.expires_at)

    second = store.acquire("beat", "b", ttl)

    assert second is not None
    assert (second.holder, second.token, second.changed_holder) == ("b", 2, True)
    assert store.acquire("beat", "a", ttl) is None


def test_a_claim_under_the_old_token_is_refused_and_changes_nothing(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    old = store.acquire("beat", "a", ttl)
    assert old is not None
    planned = claim_next(create_due(store, "report"))
    before = snapshot(store.get_schedule("report"))
    clock.move_to(old.expires_at)
    assert store.acquire("beat", "b", ttl) is not None

    with pytest.raises(LeaseLost):
        store.claim([planned], lease=old)

    assert store.executions() == []
    assert snapshot(store.get_schedule("report")) == before


def test_an_expired_grant_cannot_claim_even_when_no_one_took_over(backend: Backend) -> None:
    store, clock = backend.store, backend.clock
    grant = store.acquire("beat", "a", backend.expiring_ttl)
    assert grant is not None
    planned = claim_next(create_due(store, "report"))
    clock.move_to(grant.expires_at)

    with pytest.raises(LeaseLost):
        store.claim([planned], lease=grant)

    assert store.executions() == []
    assert store.get_schedule("report").row_version == 1


def test_release_lets_a_standby_acquire_at_once_with_the_next_token(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None

    assert store.release(grant) is True

    info = store.inspect("beat")
    assert info is not None and not info.held
    standby = store.acquire("beat", "b", LONG_TTL)
    assert standby is not None
    assert (standby.holder, standby.token, standby.changed_holder) == ("b", 2, True)


def test_release_by_a_stale_grant_does_nothing(store: Store) -> None:
    stale = store.acquire("beat", "a", LONG_TTL)
    assert stale is not None and store.release(stale)
    current = store.acquire("beat", "b", LONG_TTL)
    assert current is not None

    assert store.release(stale) is False

    info = store.inspect("beat")
    assert info is not None
    assert (info.holder, info.token, info.held) == ("b", 2, True)
    assert store.acquire("beat", "a", LONG_TTL) is None


def test_a_released_holder_coming_back_gets_a_new_token(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None and store.release(grant)

    again = store.acquire("beat", "a", LONG_TTL)

    # Its old grant was given up: claims under it must stay refused, so the token moves on.
    assert again is not None
    assert (again.token, again.changed_holder) == (2, True)


def test_expiry_follows_the_store_clock_up_to_the_boundary(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    grant = store.acquire("beat", "a", ttl)
    assert grant is not None

    clock.move_just_before(grant.expires_at)
    assert store.acquire("beat", "b", ttl) is None

    clock.move_to(grant.expires_at)
    taken = store.acquire("beat", "b", ttl)
    assert taken is not None
    assert (taken.holder, taken.token) == ("b", 2)


def test_a_renewal_pushes_expiry_forward_on_the_store_clock(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    first = store.acquire("beat", "a", ttl)
    assert first is not None
    clock.advance(ttl.total_seconds() / 2)
    renewed = store.acquire("beat", "a", ttl)
    assert renewed is not None

    clock.move_to(first.expires_at)

    assert store.acquire("beat", "b", ttl) is None
    info = store.inspect("beat")
    assert info is not None and info.held and info.holder == "a"


def test_racing_acquires_elect_one_holder(backend: Backend) -> None:
    peers = [backend.open_peer() for _ in range(4)]

    results = run_together(*(lambda p=peer, h=f"r{i}": p.acquire("beat", h, LONG_TTL)
                             for i, peer in enumerate(peers)))

    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    grants = [r for r in results if r is not None]
    assert len(grants) == 1
    assert grants[0].token == 1
    info = backend.store.inspect("beat")
    assert info is not None and info.holder == grants[0].holder


def test_leases_of_different_names_are_independent(store: Store) -> None:
    first = store.acquire("beat", "a", LONG_TTL)
    other = store.acquire("reports", "b", LONG_TTL)

    assert first is not None and other is not None
    assert (first.token, other.token) == (1, 1)


def test_a_lapsed_lease_renewed_by_its_own_holder_keeps_the_token(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    grant = store.acquire("beat", "a", ttl)
    assert grant is not None
    clock.move_to(grant.expires_at)
    info = store.inspect("beat")
    assert info is not None and not info.held

    # Nobody held it in between, so no claim can have been fenced out by another holder.
    again = store.acquire("beat", "a", ttl)

    assert again is not None
    assert (again.token, again.changed_holder) == (1, False)


def test_a_lease_never_changed_hands_has_no_previous_holder(store: Store,
                                                            clock: StoreClock) -> None:
    assert store.acquire("beat", "a", LONG_TTL) is not None
    clock.advance(0.05)
    assert store.acquire("beat", "a", LONG_TTL) is not None

    info = store.inspect("beat")
    assert info is not None
    assert (info.previous_holder, info.changed_at) == (None, None)


def test_taking_an_expired_lease_records_its_holder_until_its_expiry(backend: Backend) -> None:
    store, clock, ttl = backend.store, backend.clock, backend.expiring_ttl
    first = store.acquire("beat", "a", ttl)
    assert first is not None
    clock.move_to(first.expires_at)
    assert store.acquire("beat", "b", ttl) is not None

    # A renewal by the new holder (PostgreSQL's one-statement path) keeps the record.
    assert store.acquire("beat", "b", ttl) is not None

    info = store.inspect("beat")
    assert info is not None
    assert (info.holder, info.previous_holder, info.changed_at) == ("b", "a", first.expires_at)


def test_a_release_records_its_holder_until_then_and_the_next_holder_keeps_it(
        store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    before = store.now()
    assert store.release(grant)
    after = store.now()

    released = store.inspect("beat")
    assert released is not None and released.holder is None
    assert released.previous_holder == "a"
    assert released.changed_at is not None and before <= released.changed_at <= after
    assert store.acquire("beat", "b", LONG_TTL) is not None
    taken = store.inspect("beat")
    assert taken is not None
    assert (taken.holder, taken.previous_holder, taken.changed_at) == (
        "b", "a", released.changed_at)
    [listed] = store.list_leases("beat")
    assert (listed.previous_holder, listed.changed_at) == ("a", released.changed_at)


def test_a_stale_release_records_nothing(store: Store) -> None:
    stale = store.acquire("beat", "a", LONG_TTL)
    assert stale is not None and store.release(stale)
    assert store.acquire("beat", "b", LONG_TTL) is not None
    recorded = store.inspect("beat")

    assert store.release(stale) is False

    after = store.inspect("beat")
    assert recorded is not None and after is not None
    assert after == replace(recorded, store_now=after.store_now)


def test_acquire_many_is_acquire_of_each_in_order(store: Store) -> None:
    """Held leases are renewed (token kept), free ones taken, another holder's refused: as
    the calls one after the other, whatever the store does in one round trip."""
    first = store.acquire("mine", "a", LONG_TTL)
    assert first is not None and store.acquire("theirs", "b", LONG_TTL) is not None

    mine, theirs, free = store.acquire_many(["mine", "theirs", "free"], "a", LONG_TTL)

    assert mine is not None and (mine.token, mine.changed_holder) == (first.token, False)
    assert mine.expires_at >= first.expires_at
    assert theirs is None
    assert free is not None and (free.holder, free.token, free.changed_holder) == ("a", 1, True)
    info = store.inspect("theirs")
    assert info is not None and info.holder == "b"
