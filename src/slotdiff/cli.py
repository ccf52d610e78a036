"""Command line: parse → build → execute; ``main(argv) -> int``.

``slotdiff MODEL`` analyzes one model; other commands are looked up in ``COMMANDS`` and
imported only when used, so a run imports only what it needs.

Exit codes (``EXIT_CODES``, printed under every --help): 0 success; 1 a finding, named by the
command's ``EXIT_1`` (lint errors, ``scan --fail-on-new`` found something new, ``fit``/``train``
found it does not fit); 2 bad input or usage (one line on stderr, never a traceback);
3 internal error (a bug; one line unless SLOTDIFF_DEBUG=1); 130 interrupted.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from .core.errors import OutputError, SlotdiffError
from .core.files import drop_stdout
from .core.printable import PrintableStream, one_line, printable

# ``slotdiff MODEL``: the analysis, when the first argument names no command
DEFAULT_COMMAND = "slotdiff.commands.analyze"

# command name → module with add_arguments(parser) and run(args) -> int (and optionally EPILOG)
COMMANDS: dict[str, str] = {
    "diff": "slotdiff.commands.diff",
    "fingerprint": "slotdiff.commands.fingerprint",
    "catalog": "slotdiff.commands.catalog",
    "gpus": "slotdiff.commands.gpus",
    "lint": "slotdiff.commands.lint",
    "fit": "slotdiff.commands.fit",
    "train": "slotdiff.commands.train",
    "choose": "slotdiff.commands.choose",
    "sweep": "slotdiff.commands.sweep",
    "moe": "slotdiff.commands.moe",
    "specdec": "slotdiff.commands.specdec",
    "formats": "slotdiff.commands.formats",
    "image": "slotdiff.commands.image",
    "latency": "slotdiff.commands.latency",
    "scan": "slotdiff.commands.scan",
}


# What each exit status means, printed under every command's --help; a command names what
# its own status 1 means in ``EXIT_1`` (commands without findings never return 1).
EXIT_CODES = (
    (0, "success"),
    (1, "{exit_1}"),
    (2, "bad input or usage (one line on stderr)"),
    (3, "internal error, a bug (SLOTDIFF_DEBUG=1 for the traceback)"),
    (130, "interrupted"),
)


def exit_codes_text(exit_1: str | None) -> str:
    """The ``exit codes:`` block of a --help page."""
    rows = [(c, t.format(exit_1=exit_1)) for c, t in EXIT_CODES if exit_1 or c != 1]
    if not exit_1:
        rows.insert(1, (1, "not used by this command"))
    return "exit codes:\n" + "".join(f"  {c:<4} {t}\n" for c, t in rows)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SlotdiffError(self.prog, message)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout, and says under each numeric flag which forms it accepts
    (the shared argparse types of commands/options.py carry that as ``accepts``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        accepts = getattr(action.type, "accepts", None)
        if accepts and accepts not in text:
            text = f"{text} [{accepts}]" if text else f"[{accepts}]"
        return text


def _dispatch(argv: list[str]) -> int:
    """Import the one command module ``argv`` names (the analysis when it names none), build
    its parser and run it."""
    name = argv[0] if argv and argv[0] in COMMANDS else None
    module = importlib.import_module(COMMANDS[name] if name else DEFAULT_COMMAND)
    epilog = getattr(module, "EPILOG", "").replace("{commands}", ", ".join(COMMANDS))
    parser = _Parser(
        prog=f"slotdiff {name}" if name else "slotdiff",
        description=module.__doc__,
        formatter_class=_HelpFormatter,
        epilog=(epilog.rstrip("\n") + "\n\n" if epilog else "")
        + exit_codes_text(getattr(module, "EXIT_1", None)),
    )
    module.add_arguments(parser)
    args = argv[1:] if name else argv
    files_dest = getattr(module, "FILES_AFTER_SEPARATOR", None)
    if not files_dest:
        return int(module.run(parser.parse_args(args)))
    # Everything after the first ``--`` is a file name, whatever it looks like (another
    # ``--`` included, which argparse would drop): no file name can become an option.
    cut = args.index("--") if "--" in args else len(args)
    namespace = parser.parse_args(args[:cut])
    setattr(namespace, files_dest, [*(getattr(namespace, files_dest) or []), *args[cut + 1 :]])
    namespace.separated = cut < len(args)
    return int(module.run(namespace))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (see the module docstring)."""

    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    sys.stdout = PrintableStream(stdout)  # type: ignore[assignment]  # config text cannot drive the terminal
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a full disk under stdout is said here, not lost at exit
        return code
    except SlotdiffError as err:
        sys.stderr.write(f"slotdiff: error: {one_line(err.message())}\n")
        return err.exit_code
    except OutputError as err:
        if err.filename == "stdout":
            drop_stdout(stdout)
        sys.stderr.write(f"slotdiff: error: {one_line(err.line())}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("slotdiff: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit as exit_:  # argparse --help / --version
        return int(exit_.code or 0)
    except Exception as err:  # a bug, not bad input: still one line unless debugging
        if os.environ.get("SLOTDIFF_DEBUG"):
            raise
        reason = printable(" ".join(str(err).split()))
        sys.stderr.write(
            f"slotdiff: internal error: {type(err).__name__}: {reason} "
            "(rerun with SLOTDIFF_DEBUG=1 for the traceback, and please report it)\n"
        )
        return 3
    finally:
        sys.stdout = stdout


def entry() -> None:
    """Console-script entry point."""
    code = main()
    # The process ends here: the collections of interpreter shutdown need not walk every
    # object it made (about a tenth of a short run's CPU). Shutdown itself still runs
    # (atexit handlers, stream flushes, threads joined); the objects are freed by refcount.
    gc.freeze()
    raise SystemExit(code)
