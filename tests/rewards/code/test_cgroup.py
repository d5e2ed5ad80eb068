"""Where a sandbox's memory cgroup goes, read from mount tables written here, and one made for real
where this machine allows it."""

import os
from pathlib import Path

import pytest

from rewardlab.rewards.code.cgroup import memory_cgroup, parents

V1 = "40 30 0:35 {root} {mount} rw,nosuid - cgroup cgroup rw,memory\n"
V2 = "41 30 0:36 {root} {mount} rw,nosuid - cgroup2 cgroup2 rw\n"
OTHER = "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"


def test_v1_memory_hierarchy_below_our_own_cgroup(tmp_path):
    own = tmp_path / "jobs" / "worker"
    own.mkdir(parents=True)
    mounts = OTHER + V1.format(root="/", mount=tmp_path)
    assert parents(mounts, "4:memory:/jobs/worker\n0::/\n") == [(1, own)]


def test_v2_where_memory_is_handed_to_children_first(tmp_path):
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    (v1 / "me").mkdir(parents=True)
    (v2 / "slice" / "me").mkdir(parents=True)
    (v2 / "slice" / "cgroup.subtree_control").write_text("cpu memory\n")
    (v2 / "slice" / "me" / "cgroup.subtree_control").write_text("")  # it holds processes
    mounts = V1.format(root="/", mount=v1) + V2.format(root="/", mount=v2)
    found = parents(mounts, "4:memory:/me\n0::/slice/me\n")
    assert found == [(2, v2 / "slice"), (1, v1 / "me")]


def test_no_memory_cgroup_to_be_had(tmp_path):
    (tmp_path / "me").mkdir()
    (tmp_path / "cgroup.subtree_control").write_text("cpu pids\n")
    mounts = OTHER + V2.format(root="/", mount=tmp_path)
    assert parents(mounts, "0::/me\n") == []  # v2 without memory for children, and no v1
    assert parents(OTHER, "0::/\n") == []  # no cgroup file system at all
    # a container's mount of a cgroup that is not ours (our path is outside what it shows)
    assert parents(V1.format(root="/other", mount=tmp_path), "4:memory:/me\n") == []


def test_a_real_cgroup_is_limited_and_removed_and_so_are_those_of_makers_gone():
    cgroup = memory_cgroup(64 << 20)
    if cgroup is None:
        pytest.skip("no memory cgroup can be made here (the reward then reports per_process)")
    limit = "memory.max" if cgroup.version == 2 else "memory.limit_in_bytes"
    assert int((cgroup.path / limit).read_text()) == 64 << 20
    namespace = os.stat("/proc/self/ns/pid").st_ino
    assert cgroup.path.name.startswith(f"rewardlab-{namespace}-{os.getpid()}-")
    # one left behind by a worker that was killed (no process has that pid), one of a live one
    gone = cgroup.path.with_name(f"rewardlab-{namespace}-{2**22 + 7}-0000")
    alive = cgroup.path.with_name(f"rewardlab-{namespace}-1-0000")
    gone.mkdir()
    alive.mkdir()
    try:
        another = memory_cgroup(64 << 20)
        assert another is not None and not gone.exists() and alive.exists()
        another.remove()
    finally:
        alive.rmdir()
    cgroup.remove()
    assert not Path(cgroup.path).exists()
