"""Output that survives any terminal, and a reader that goes away: characters the stream's
encoding lacks are written in ASCII (`ascii_spelling`), a closed pipe ends the command
quietly with 141, and a full disk under stdout with one line on stderr."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys

#: Exit statuses (the `flows._cli.app` docstring says when each is given).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


#: 128 + SIGPIPE: the reader of stdout (or stderr) went away (see the module docstring).
EXIT_BROKEN_PIPE = 141
#: stdout or stderr could not be written (a full disk, `/dev/full`): as a result file.
EXIT_CANNOT_WRITE = EXIT_SOLVER
#: The name `codecs` knows `_spell_unencodable` by (the error handler of stdout and stderr).
OUTPUT_ERRORS = "flows-ascii"

#: ASCII spellings of the characters the toolkit prints; Greek letters are spelled by name
#: (θ "theta", Σ "Sigma"), super- and subscripts as ^ and _ (x² "x^2", θ₀ "theta_0").
ASCII_SPELLINGS = {
    "\u2212": "-",  # minus sign
    "\u2013": "-",
    "\u2014": "--",
    "\u2016": "||",
    "\u00b7": "*",
    "\u00d7": "x",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u2248": "~=",
    "\u2272": "<~",
    "\u2273": ">~",
    "\u226a": "<<",
    "\u226b": ">>",
    "\u2261": "==",
    "\u221d": "~",
    "\u00b1": "+/-",
    "\u2213": "-/+",
    "\u2192": "->",
    "\u2190": "<-",
    "\u21a6": "|->",
    "\u21d2": "=>",
    "\u21d4": "<=>",
    "\u21b3": "->",
    "\u2032": "'",
    "\u2026": "...",
    "\u22ef": "...",
    "\u2207": "grad ",
    "\u2202": "d",
    "\u221a": "sqrt",
    "\u222b": "int ",
    "\u221e": "inf",
    "\u2208": " in ",
    "\u2205": "{}",
    "\u27e8": "<",
    "\u27e9": ">",
    "\u00bd": "1/2",
    "\u00bc": "1/4",
    "\u00a7": "sec. ",
    "\u00b0": " deg",
    "\u2713": "ok",
    "\u2717": "x",
    "\u2022": "*",
    "\u0307": "'",  # combining dot above: a time derivative, ȧ "a'"
    "\u0302": "_hat",
    "\u0304": "_bar",
    "\u0303": "_tilde",
    "\u00a0": " ",
}


def ascii_spelling(text: str) -> str:
    """`text` in ASCII: the toolkit's characters spelled (`ASCII_SPELLINGS`, Greek letters
    by name, x² "x^2", θ₀ "theta_0", accents dropped); anything else as a `\\u` escape."""
    import unicodedata

    out: list[str] = []
    script, run = "", ""  # a run of super- or subscripts, written as one ^(...) or _...

    def close() -> None:
        nonlocal script, run
        if script:
            body = ascii_spelling(run)
            wrap = script == "^" and len(body) > 1 and not body.isalnum()
            out.append(script + (f"({body})" if wrap else body))
        script, run = "", ""

    for ch in unicodedata.normalize("NFD", text):
        tag, _, base = unicodedata.decomposition(ch).partition(" ")
        kind = {"<super>": "^", "<sub>": "_"}.get(tag, "")
        if kind:
            if kind != script:
                close()
            script = kind
            run += "".join(chr(int(h, 16)) for h in base.split())
            continue
        close()
        name = unicodedata.name(ch, "")
        if ch.isascii():
            out.append(ch)
        elif ch in ASCII_SPELLINGS:
            out.append(ASCII_SPELLINGS[ch])
        elif name.startswith("GREEK ") and " LETTER " in name:
            letter = name.rsplit(" ", 1)[1].lower().replace("lamda", "lambda")
            out.append(letter.capitalize() if " CAPITAL " in name else letter)
        elif (compat := unicodedata.normalize("NFKC", ch)) != ch:
            out.append(ascii_spelling(compat))  # ℓ "l", ″ "''", ℝ "R"
        elif unicodedata.combining(ch):
            pass  # an accent
        else:
            out.append(ch.encode("ascii", "backslashreplace").decode("ascii"))
    close()
    return "".join(out)


def _spell_unencodable(exc: UnicodeError) -> tuple[str | bytes, int]:
    """The `codecs` error handler of stdout and stderr (`OUTPUT_ERRORS`): characters the
    stream's encoding lacks are written in ASCII (`ascii_spelling`). A byte that a file
    name carried in as a surrogate (`surrogateescape`) is written back as that byte."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    run = exc.object[exc.start : exc.end]
    if 0xDC80 <= ord(run[0]) <= 0xDCFF:
        return bytes([ord(run[0]) - 0xDC00]), exc.start + 1
    n = next((i for i, c in enumerate(run) if 0xDC80 <= ord(c) <= 0xDCFF), len(run))
    return ascii_spelling(run[:n]), exc.start + n


class _OutputLost(BaseException):
    """stdout or stderr could not be written (its reader went away, the disk is full).
    Ends the command: a BaseException, so that no `except Exception` takes it for the
    failure of one computation (a sweep's grid point) and goes on computing."""

    def __init__(self, fd: int, error: OSError):
        super().__init__(fd, error)
        self.fd, self.error = fd, error


class _OutputFile(io.FileIO):
    """File descriptor 1 or 2 under `sys.stdout` / `sys.stderr` (`_guard_output`): a write
    that fails raises `_OutputLost` naming the descriptor."""

    def write(self, data):
        try:
            return super().write(data)
        except OSError as exc:
            raise _OutputLost(self.fileno(), exc) from None


def _guard_output() -> None:
    """Put stdout and stderr on `_OutputFile`s, with the encoding they had and
    `_spell_unencodable` for what it lacks. Costs microseconds; a stream that is not a
    file descriptor (a test's capture, a closed one) is left as it is."""
    import codecs

    codecs.register_error(OUTPUT_ERRORS, _spell_unencodable)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
            stream.flush()
            encoding = stream.encoding
        except (AttributeError, OSError, ValueError):
            continue
        wrapped = io.TextIOWrapper(
            io.BufferedWriter(_OutputFile(fd, "w", closefd=False)),
            encoding=encoding,
            errors=OUTPUT_ERRORS,
            line_buffering=stream.line_buffering,
            write_through=getattr(stream, "write_through", False),
        )
        setattr(sys, name, wrapped)


def _finish_output(code: int, lost: _OutputLost | None = None) -> int:
    """Flush stdout and stderr — a failure shows here, not in Python's last flush, where it
    can only print a traceback — and return the exit status: `code`, or after a lost
    output (`lost`, or one found now) `EXIT_BROKEN_PIPE` (its reader went away; silent) or
    `EXIT_CANNOT_WRITE` (one line on stderr). A descriptor that failed is pointed at
    /dev/null, so that the next flush, and Python's at exit, succeed."""
    first = lost
    for _ in range(4):  # each stream fails at most once: then it writes to /dev/null
        if lost is not None:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, lost.fd)
                os.close(null)
            lost = None
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
            break
        except _OutputLost as exc:
            first, lost = first or exc, exc
    if first is None:
        return code
    if isinstance(first.error, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    if first.fd != 2:
        cause = first.error.strerror or str(first.error) or type(first.error).__name__
        with contextlib.suppress(OSError):
            os.write(2, f"flows: error: cannot write output: {cause}\n".encode(errors="replace"))
    return EXIT_CANNOT_WRITE


#: errno values of a path the OS refuses as such (a name over 255 bytes, a path over 4095,
#: a symlink loop, a byte sequence the file system does not take, a component that is no
#: folder, no permission): bad input, exit 2, whenever it is met.
PATH_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("ENAMETOOLONG", "ELOOP", "EILSEQ", "ENOTDIR", "EISDIR", "EACCES", "EPERM")
    if hasattr(errno, n)
)

#: The longest path a message shows whole; a longer one is shown by its ends.
SHOWN_PATH_CHARS = 120


def shown_path(path) -> str:
    """`path` for a one-line message: quoted (undecodable bytes as escapes), a long one
    shortened to its beginning and end with its length in bytes."""
    text = os.fsdecode(path) if isinstance(path, bytes | os.PathLike) else str(path)
    if len(text) <= SHOWN_PATH_CHARS:
        return repr(text)
    return f"{text[:60]!r} … {text[-40:]!r} ({len(os.fsencode(text)):,} bytes)"


def path_refusal(exc: OSError) -> str | None:
    """The one-line message of an `OSError` by which the OS refused a path (`PATH_ERRNOS`),
    naming the path, the cause and what to do; None for any other error."""
    if exc.errno not in PATH_ERRNOS or exc.filename is None:
        return None
    cause = exc.strerror or os.strerror(exc.errno or 0)
    what = f"the OS refuses the path {shown_path(exc.filename)}: {cause}"
    if exc.errno == errno.ENAMETOOLONG:
        return (
            f"{what}. A file or folder name holds at most 255 bytes, a whole path 4095 "
            "(non-ASCII characters take 2–4 bytes each); choose a shorter --out."
        )
    if exc.errno == errno.EILSEQ:
        return f"{what}. The file system does not accept these bytes in a name; use another."
    return f"{what}. Choose a path you can create and write, e.g. a folder in your home."
