"""An incident folder under the logs root, read safely: resolved and checked once, opened without following links,
and copied (hard links where possible) into a snapshot that triage reads, so a folder or file swapped for a link
after the check reads nothing outside the root."""
from __future__ import annotations

import errno
import os
import pathlib
import stat
from dataclasses import dataclass, field

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a pipe planted in the folder must not hang the server; regular files ignore the flag.
_ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class PathRejected(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def resolve_incident(logs_root: str | os.PathLike, location: str) -> pathlib.Path:
    """The incident folder for ``location``, guaranteed to be inside ``logs_root`` after resolving symlinks."""
    root = pathlib.Path(logs_root).resolve()
    if not location or "\x00" in location:
        raise PathRejected(400, "empty log location")
    candidate = pathlib.Path(location)
    if ".." in candidate.parts:
        raise PathRejected(403, f"log location {location!r} may not contain '..'")
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if target == root:
        raise PathRejected(403, f"log location {location!r} is the logs root itself; name an incident folder under it")
    if root not in target.parents:
        raise PathRejected(403, f"log location {location!r} is outside the logs root")
    if not target.exists():
        raise PathRejected(404, f"log location {location!r} does not exist under the logs root")
    escape = first_escape(target, root)
    if escape is not None:
        raise PathRejected(403, f"log location {location!r} holds {escape}, a link that leads outside the logs root")
    return target


def first_escape(folder: pathlib.Path, root: pathlib.Path) -> str | None:
    """The first path under ``folder`` that, once links are followed, lies outside ``root`` (None when every file
    triage would read is inside). Directories are visited once by real path, so a link loop ends the walk."""
    seen: set[str] = set()
    for current, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(current)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        for name in sorted(dirs) + sorted(files):
            path = pathlib.Path(current) / name
            resolved = pathlib.Path(os.path.realpath(path))
            if resolved != root and root not in resolved.parents:
                return str(path.relative_to(folder))
    return None


# -- reading only what was resolved ------------------------------------------------------------------------------

def _open_beneath(root_fd: int, relative: pathlib.PurePath, *, directory: bool) -> int:
    """Open ``relative`` under the open root one component at a time, following no link on the way: whatever the
    file system looks like now, the result lies under the root (or the open fails)."""
    fd = os.dup(root_fd)
    try:
        parts = relative.parts
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = _DIR_FLAGS if directory or not last else _ENTRY_FLAGS
            following = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = following
        return fd
    except BaseException:
        os.close(fd)
        raise


class IncidentFolder:
    """The incident folder opened once, at acceptance, with the logs root it was resolved under; every later read
    goes through these descriptors, never through the path again."""

    def __init__(self, root: pathlib.Path, folder: pathlib.Path):
        self.root, self.folder = root, folder
        self.root_fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)  # the configured root may itself be a link
        try:
            self.fd = _open_beneath(self.root_fd, folder.relative_to(root), directory=True)
        except BaseException:
            os.close(self.root_fd)
            raise

    def close(self) -> None:
        for fd in (self.fd, self.root_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.root_fd = -1


def open_incident(logs_root: str | os.PathLike, folder: pathlib.Path) -> IncidentFolder:
    """Open the folder ``resolve_incident`` returned; a folder changed into a link since then is refused (409)."""
    root = pathlib.Path(logs_root).resolve()
    try:
        return IncidentFolder(root, folder)
    except (OSError, ValueError) as exc:  # ValueError: the root itself now resolves elsewhere
        why = getattr(exc, "strerror", None) or exc
        raise PathRejected(409, f"{folder.name!r} changed while it was being checked ({why}); "
                                f"send the alert again") from None


@dataclass
class Snapshot:
    folder: pathlib.Path
    files: int = 0
    linked: int = 0
    copied: int = 0
    warnings: list[str] = field(default_factory=list)


def snapshot_incident(handle: IncidentFolder, dest: pathlib.Path) -> Snapshot:
    """Mirror the open incident folder into ``dest`` (created; it and its parent readable by this user only): each
    regular file hard linked through its open descriptor, or copied from it on another file system. A link is
    followed only when it resolves inside the logs root, and then opened component by component from the root, so
    nothing a link (planted before or after the check) points to outside the root is read. A directory or file
    reached twice is taken once."""
    # Raw logs may hold secrets: only the server's user can reach the snapshot (and its parent) while it exists.
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.parent.chmod(0o700)
    dest.mkdir(0o700)
    snap = Snapshot(dest)
    seen: set[tuple[int, int]] = set()
    top = os.fstat(handle.fd)
    seen.add((top.st_dev, top.st_ino))
    dest_fd = os.open(dest, _DIR_FLAGS)
    try:
        _mirror(handle, os.dup(handle.fd), handle.folder.relative_to(handle.root), dest_fd, pathlib.PurePath(),
                snap, seen)
    finally:
        os.close(dest_fd)
    return snap


def _mirror(handle: IncidentFolder, dir_fd: int, real: pathlib.PurePath, dest_fd: int, shown: pathlib.PurePath,
            snap: Snapshot, seen: set[tuple[int, int]]) -> None:
    """Mirror one open directory (closed on return); ``real`` is where it lies under the root, for resolving
    relative links, and ``shown`` its name under the incident folder, for warnings."""
    try:
        for name in sorted(os.listdir(dir_fd)):
            label = str(shown / name)
            try:
                entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(entry.st_mode):
                    target = _link_target(handle, real, name)
                    if target is None:
                        snap.warnings.append(f"{label} links outside the logs root; not read")
                        continue
                    fd, where = _open_beneath(handle.root_fd, target, directory=False), target
                else:
                    fd, where = os.open(name, _ENTRY_FLAGS, dir_fd=dir_fd), real / name
            except OSError as exc:
                snap.warnings.append(f"{label} cannot be opened ({exc.strerror or exc}); not read")
                continue
            try:
                st = os.fstat(fd)
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue  # a link loop, or a second way to a file or directory already taken
                seen.add(key)
                if stat.S_ISDIR(st.st_mode):
                    os.mkdir(name, 0o700, dir_fd=dest_fd)
                    sub_dest = os.open(name, _DIR_FLAGS, dir_fd=dest_fd)
                    try:
                        _mirror(handle, os.dup(fd), where, sub_dest, shown / name, snap, seen)
                    finally:
                        os.close(sub_dest)
                elif stat.S_ISREG(st.st_mode):
                    if _place(fd, name, dest_fd) == "linked":
                        snap.linked += 1
                    else:
                        snap.copied += 1
                    snap.files += 1
                else:
                    snap.warnings.append(f"{label} is not a regular file (a pipe, socket or device); not read")
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)


def _link_target(handle: IncidentFolder, real: pathlib.PurePath, name: str) -> pathlib.PurePath | None:
    """Where the link ``name`` in the directory ``real`` (under the root) leads, relative to the root; None when
    that is outside the root or the root itself. The answer is only a path: it is opened without following links."""
    resolved = pathlib.Path(os.path.realpath(handle.root / real / name))
    if resolved == handle.root or handle.root not in resolved.parents:
        return None
    return resolved.relative_to(handle.root)


def _place(src_fd: int, name: str, dest_fd: int) -> str:
    """Put the open file under ``name`` in the destination: a hard link to the very file that is open (no bytes
    written) when the file system allows, else a copy read from the descriptor."""
    try:
        os.link(f"/proc/self/fd/{src_fd}", name, dst_dir_fd=dest_fd, follow_symlinks=True)
        placed = os.stat(name, dir_fd=dest_fd, follow_symlinks=False)
        opened = os.fstat(src_fd)
        if (placed.st_dev, placed.st_ino) == (opened.st_dev, opened.st_ino):
            return "linked"
        os.unlink(name, dir_fd=dest_fd)
    except OSError as exc:
        # another file system, hard links refused (protected_hardlinks, a file system without them), no /proc
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EACCES, errno.ENOENT, errno.EMLINK, errno.EOPNOTSUPP):
            raise
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dest_fd)
    try:
        _copy(src_fd, out)
    finally:
        os.close(out)
    return "copied"


def _copy(src_fd: int, out_fd: int) -> None:
    offset = 0
    try:
        while sent := os.sendfile(out_fd, src_fd, offset, 1 << 24):
            offset += sent
        return
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) or offset:
            raise
    while chunk := os.pread(src_fd, 1 << 20, offset):  # a file system without sendfile
        os.write(out_fd, chunk)
        offset += len(chunk)
