"""Ownership proofs: an owner key kept outside every folder flows writes into, the tags
made with it, and temporaries created under a name that proves who made them."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

# ---------------------------------------------------------------------------------------
# Ownership proofs: an owner key kept outside every folder flows writes into

#: Environment variable naming the file of the owner key (default: `owner_key_path()`).
OWNER_KEY_ENV = "FLOWS_OWNER_KEY"


def owner_key_path() -> Path:
    """`$FLOWS_OWNER_KEY`, else `$XDG_STATE_HOME/flows/owner-key`, else
    `~/.local/state/flows/owner-key`: a random secret of this user, created on first use."""
    env = os.environ.get(OWNER_KEY_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "flows" / "owner-key"


def _read_owner_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != 64:
            return None
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None  # a key another user planted proves nothing
        text = os.pread(fd, 64, 0).decode("ascii")
        return bytes.fromhex(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


@functools.cache
def _owner_key_at(path: str) -> bytes | None:
    where = Path(path)
    key = _read_owner_key(where)
    if key is not None:
        return key
    tmp = None
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".owner-key.", suffix=".tmp", dir=where.parent)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
            fh.flush()
            os.fsync(fh.fileno())
        # a link appears complete or not at all; two processes racing keep the first key
        with contextlib.suppress(FileExistsError):
            os.link(tmp, where)
    except OSError:
        return None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return _read_owner_key(where)


def owner_key() -> bytes | None:
    """This user's owner key (32 random bytes, created on first use with O_EXCL semantics,
    mode 0600, outside every folder flows writes into), or None where it cannot be kept
    (then nothing flows left behind is ever recognized as its own, so nothing is removed).
    """
    return _owner_key_at(str(owner_key_path()))


def owner_tag(*parts: str) -> str | None:
    """A 16-hex-digit HMAC of `parts` under `owner_key()`: what flows writes into a name or
    a marker to prove later that it created the file (a recipe nobody without the key can
    follow). None without a key."""
    key = owner_key()
    if key is None:
        return None
    msg = "\0".join(("flows-owner", *parts)).encode("utf-8", "surrogateescape")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:16]


def _tag_ok(tag: object, *parts: str) -> bool:
    want = owner_tag(*parts)
    return isinstance(tag, str) and want is not None and hmac.compare_digest(tag, want)


def create_owned_temporary(folder: str | os.PathLike, target: str, *, mode: int = 0o600) -> str:
    """Create (O_CREAT | O_EXCL, never following a link) a new temporary file in `folder`
    for the file `target`, named `.<target>.<nonce>.<tag>.tmp` with a fresh random nonce and
    its owner tag; returns its path. `proven_temporary_target` recognizes exactly such
    names later."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        nonce = secrets.token_hex(4)
        tag = owner_tag("tmp", target, nonce)
        name = f".{target}.{nonce}" + (f".{tag}" if tag else "") + ".tmp"
        path = os.path.join(os.fspath(folder), name)
        try:
            fd = os.open(path, flags, mode)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(errno.EEXIST, "no free temporary name", os.fspath(folder))
