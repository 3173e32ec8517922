"""A least-recently-used cache, locked: the one kind of cache the constrained decoder keeps across
schemas and grammars (compiled small DFAs, length-bounded DFAs, a vocabulary's region shapes and
frame splits).

Locked because schemas may compile, and grammars fill masks, in several threads at once (a
server's request threads): an OrderedDict's lookup then move to the end must not meet another
thread's eviction of the same key between the two. The lock is held only around the dictionary's
operations, never while a value is built, so two threads may build the same value; the second
one stored replaces the first, counted once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable


class LRU:
    """Values by key, the least recently used out first once their weights (`weigh(value)`, 1 each
    by default: a count of entries) pass `limit`; the last one stored always stays."""

    def __init__(self, limit: int, weigh: Callable[[object], int] | None = None):
        self.limit = limit
        self.weight = 0
        self._weigh = weigh or (lambda value: 1)
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key):
        """The value, now the most recently used; None where it is not kept."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def __setitem__(self, key, value) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            self.weight += self._weigh(value) - (0 if old is None else self._weigh(old))
            self._items[key] = value
            while self.weight > self.limit and len(self._items) > 1:
                self.weight -= self._weigh(self._items.popitem(last=False)[1])

    def values(self) -> list:
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.weight = 0
