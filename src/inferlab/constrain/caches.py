"""The one owner of what the constrained decoder keeps across schemas and grammars (as xgrammar's
GrammarCompiler owns its compile cache): every process-wide cache registers here with its bound,
and CACHES.clear() forgets them all (a cold start), CACHES.clear("compile") what a compile keeps.

A cache stays in the module that fills it (compiler.py: small DFAs; schema.algebra: length-bounded
DFAs; regex.py: class texts; token_split.py: a vocabulary's region shapes and frame splits), each
bounded there (lru.LRU by entries or bytes); this module only names, sizes and clears them, so it
imports nothing and any layer may register. A grammar's own caches are the grammar's
(StackGrammar.clear: bounded per grammar, gone with it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Cache:
    name: str
    group: str                     # "compile" (schema -> DFAs) or "masks" (a vocabulary's walks)
    clear: Callable[[], None]
    size: Callable[[], int]        # entries kept now
    bound: str                     # what bounds it, in words (a limit and its unit)


class CacheOwner:
    def __init__(self):
        self._caches: dict[str, Cache] = {}

    def register(self, name: str, group: str, clear: Callable[[], None], size: Callable[[], int], bound: str) -> None:
        self._caches[name] = Cache(name, group, clear, size, bound)

    def register_lru(self, fn, group: str) -> None:
        """A functools.lru_cache'd function, under its module and name; its maxsize is its bound
        (None only where the keys are a fixed, finite set: class names, format names)."""
        maxsize = fn.cache_parameters()["maxsize"]
        bound = f"{maxsize:,} entries" if maxsize is not None else "one entry per fixed key (class or format name)"
        self.register(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}", group, fn.cache_clear,
                      lambda: fn.cache_info().currsize, bound)

    def clear(self, group: str | None = None) -> None:
        """Forget every registered cache, or those of one group."""
        for cache in self._caches.values():
            if group is None or cache.group == group:
                cache.clear()

    def sizes(self) -> dict[str, int]:
        """{name: entries kept now}."""
        return {name: cache.size() for name, cache in self._caches.items()}

    def bounds(self) -> dict[str, str]:
        return {name: cache.bound for name, cache in self._caches.items()}


CACHES = CacheOwner()
