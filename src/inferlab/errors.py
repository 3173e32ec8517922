"""The one error type the CLI turns into a one-line message and exit code 2."""


class InferlabError(Exception):
    """Bad input or an impossible request.

    The message is one line that names the problem: the flag, the unit, the JSON pointer.
    """
