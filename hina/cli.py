"""What the command-line tools (``hina-ctl``, ``hina-worker``) share: exit statuses, a parser
whose usage errors are one line, and ``--help`` pages that end with an example."""
from __future__ import annotations

import argparse

__all__ = ["EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "OneLineParser", "help_with_example"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit status 2)."""

    def error(self, message: str):
        option, sep, _ = message.partition(": expected one argument")
        if sep and option.startswith("argument -"):
            # argparse reads a value that starts with '-' as the next option
            first = option[len("argument "):].split("/")[-1]
            message += f" (a value that starts with '-' goes as {first}=VALUE)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def help_with_example(description: str, example: str) -> dict:
    """Keyword arguments of ``ArgumentParser`` / ``add_parser``: ``description`` and an
    ``example:`` epilog, printed as written."""
    return dict(description=description, epilog=f"example:\n  {example}",
                formatter_class=argparse.RawDescriptionHelpFormatter)
