"""How often one client may fail to sign in: :data:`ATTEMPTS` failures in :data:`WINDOW`
seconds, then every sign-in from that address is answered 429 with ``Retry-After`` until the
oldest failure leaves the window.

A token of 16 characters or more cannot be guessed at any rate; the throttle keeps a client
from spending the server's time trying, and makes a slow guess slower still. While an address
is throttled a right token is refused too: otherwise the refusals would only hide the wrong
guesses. An IPv6 client is counted by its /64, which one host can fill with addresses. At most
:data:`ADDRESSES` addresses are remembered (the oldest forgotten first), so a flood of
addresses costs bounded memory. Behind a reverse proxy every client has the proxy's address
and they share one count.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

#: Failed sign-ins one address may make within WINDOW seconds.
ATTEMPTS = 5
WINDOW = 60.0
#: Addresses remembered at once.
ADDRESSES = 10_000


def client_key(host: str | None) -> str:
    """What failures are counted by: the address, an IPv6 one by its /64."""
    text = (host or "").strip("[]")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass
class SignInThrottle:
    """The failed sign-ins of each client address in the last ``window`` seconds."""

    attempts: int = ATTEMPTS
    window: float = WINDOW
    addresses: int = ADDRESSES
    clock: Callable[[], float] = time.monotonic
    _failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self, key: str) -> int | None:
        """Whole seconds until ``key`` may try again, or None when it may now."""
        now = self.clock()
        with self._lock:
            failures = self._recent(key, now)
            if len(failures) < self.attempts:
                return None
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, key: str) -> None:
        now = self.clock()
        with self._lock:
            failures = self._recent(key, now)
            failures.append(now)
            if len(failures) == self.attempts:
                logger.warning("sign-in: %d wrong tokens from %r within %d s; its sign-ins "
                               "are refused until the oldest is %d s old", self.attempts, key,
                               self.window, self.window, extra={"action": "sign_in_throttled"})
            self._failures[key] = failures
            self._failures.move_to_end(key)
            while len(self._failures) > self.addresses:
                self._failures.popitem(last=False)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.get(key) or deque(maxlen=self.attempts)
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures
