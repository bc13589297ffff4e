"""Helpers of the output-path tests: a snapshot of every file of a folder, and the
kinds of thing a user may have at an output path."""

import hashlib
import os
import stat


def snapshot(root):
    """``{relative path: (kind, content)}`` of everything under ``root`` (links not
    followed): a file's SHA-256, a link's target, a FIFO's or folder's kind."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    out[rel] = ("file", hashlib.sha256(fh.read()).hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None)
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode))
    return out


def changed(before, after):
    """The entries of ``before`` that ``after`` lacks or holds differently (what a
    run changed among the files that were there before it)."""
    return sorted(k for k, v in before.items() if after.get(k) != v)


#: What a user may have where a command writes an output.
KINDS = ("user file", "fifo", "symlink", "folder")


def plant(path, kind, outside):
    """Put a ``kind`` at ``path`` (its parent created); ``outside``: a folder for a
    symbolic link's target."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "user file":
        with open(path, "wb") as fh:
            fh.write(b"my own notes\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        os.makedirs(outside, exist_ok=True)
        target = os.path.join(outside, "target.txt")
        with open(target, "wb") as fh:
            fh.write(b"the link's target\n")
        os.symlink(target, path)
    elif kind == "folder":
        os.makedirs(path)
        with open(os.path.join(path, "inside.txt"), "wb") as fh:
            fh.write(b"kept\n")
    else:
        raise ValueError(kind)
