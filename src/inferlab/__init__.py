"""inferlab: measure where the time and the memory of LLM inference go, on your own CPU."""

from inferlab import deprecation

__version__ = "0.1.0"

deprecation.install()   # the old paths of moved modules import for one release, with a warning
