"""What an unlucky operator's disk can do, for the tests: a private tmpfs (full, read-only) when the kernel lets
this user mount one (`unshare -rm`: a user and mount namespace of its own)."""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.cache
def private_tmpfs_available() -> bool:
    """True when `unshare -rm` can mount a 1 MB tmpfs (the tests that fill or freeze a disk need it)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True, check=False)
    return probe.returncode == 0
