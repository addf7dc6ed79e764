"""Partition files are untrusted: pickled, truncated, mistyped or oversized `.npy` files are a StoreError (issue 13)."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.errors import StoreError
from rag.stores.partition_index import PartitionIndex

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _written(directory) -> tuple[PartitionIndex, np.ndarray]:
    vectors = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    index = PartitionIndex(directory)
    index.write("p", "doc-A", vectors, [f"c{i}" for i in range(5)])
    return PartitionIndex(directory), vectors  # a fresh index: nothing cached


def _npy(array: np.ndarray, *, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


@_SETTINGS
@given(cut=st.integers(min_value=0, max_value=10_000), which=st.sampled_from(["vectors", "ids"]))
def test_truncated_partition_file_is_a_store_error_naming_it(tmp_path_factory, cut, which):
    directory = tmp_path_factory.mktemp("parts")
    index, _ = _written(directory)
    path = directory / f"p.{which}.npy"
    data = path.read_bytes()
    path.write_bytes(data[: cut % len(data)])
    with pytest.raises(StoreError, match=rf"partition file .*p\.{which}\.npy is damaged .*rebuilt"):
        index.load("p")


@pytest.mark.parametrize("payload", [
    np.array([{"a": 1}, None], dtype=object),          # pickled objects: never unpickled
    np.array([[1, 2], [3, 4]], dtype=np.int64),         # integers, not float vectors
    np.array([1.0, 2.0], dtype=np.float32),             # 1-d vectors
    np.zeros((2, 2, 2), dtype=np.float32),              # 3-d
])
def test_partition_vectors_of_the_wrong_kind_are_refused(tmp_path, payload):
    index, _ = _written(tmp_path)
    (tmp_path / "p.vectors.npy").write_bytes(_npy(payload, allow_pickle=payload.dtype == object))
    with pytest.raises(StoreError, match="p.vectors.npy is damaged"):
        index.load("p")


def test_pickled_ids_are_refused_without_unpickling(tmp_path):
    index, _ = _written(tmp_path)
    (tmp_path / "p.ids.npy").write_bytes(_npy(np.array(["c0", object()], dtype=object), allow_pickle=True))
    with pytest.raises(StoreError, match="never pickled"):
        index.load("p")


@pytest.mark.parametrize("rows", [10_000_000_000, 2**40])
def test_header_promising_a_giant_array_is_refused_before_allocating(tmp_path, rows):
    index, _ = _written(tmp_path)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (rows, 384)})
    (tmp_path / "p.vectors.npy").write_bytes(header.getvalue() + b"\x00" * 64)  # the header writes the magic too
    with pytest.raises(StoreError, match="header promises"):
        index.load("p")


def test_vectors_and_ids_of_different_lengths_are_refused(tmp_path):
    index, _ = _written(tmp_path)
    (tmp_path / "p.ids.npy").write_bytes(_npy(np.array(["c0", "c1"])))
    with pytest.raises(StoreError, match="5 vectors for 2 ids"):
        index.load("p")


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"count": 1}', b"\xff"])
def test_damaged_partition_metadata_is_a_store_error(tmp_path, content):
    index, _ = _written(tmp_path)
    (tmp_path / "p.json").write_bytes(content)
    with pytest.raises(StoreError, match=r"p\.json is damaged"):
        index.values()
    with pytest.raises(StoreError, match=r"p\.json is damaged"):
        index.value("p")


def test_partition_files_that_are_symlinks_are_refused_and_temp_links_not_followed(tmp_path):
    index, vectors = _written(tmp_path)
    victim = tmp_path.parent / f"{tmp_path.name}-victim"
    victim.write_bytes(b"precious")
    (tmp_path / "p.vectors.npy.tmp").symlink_to(victim)
    index.write("p", "doc-A", vectors, [f"c{i}" for i in range(5)])  # writes a new temp file, not the link target
    assert victim.read_bytes() == b"precious"
    os.replace(tmp_path / "p.ids.npy", tmp_path / "ids-real.npy")
    (tmp_path / "p.ids.npy").symlink_to(tmp_path / "ids-real.npy")
    with pytest.raises(StoreError, match="p.ids.npy is a symlink"):
        PartitionIndex(tmp_path).load("p")


def test_intact_partition_round_trips(tmp_path):
    index, vectors = _written(tmp_path)
    loaded_vectors, ids = index.load("p")
    assert ids.tolist() == [f"c{i}" for i in range(5)] and loaded_vectors.shape == vectors.shape
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.allclose(loaded_vectors, unit)
