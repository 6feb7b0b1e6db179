"""mem0's local Qdrant reopened from disk scores exactly as before the restart.

qdrant-client's local mode (1.20) loads a cosine collection's vectors raw, as float64,
where ``upsert`` keeps them float32 and unit length (qdrant/qdrant-client PR #1381); the
store opened through ``acquire_client`` gets them as written, so a restarted gateway or a
resumed bench ranks its old memories with the same scores, bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient, models

from nanobot_memory_adapters.backends.mem0.qdrant import (
    acquire_client,
    release_client,
)

POINTS = [  # not unit length, as an embedder's raw output can be
    models.PointStruct(id=1, vector=[0.1, 0.2, 0.3, 0.5], payload={"user_id": "a"}),
    models.PointStruct(id=2, vector=[3.0, 1.0, 0.0, 0.0], payload={"user_id": "a"}),
    models.PointStruct(id=3, vector=[0.0, 0.0, 0.0, 0.0], payload={"user_id": "a"}),
]
QUERY = [0.5, 0.5, 0.1, 0.1]


def _fill(client: QdrantClient) -> None:
    client.create_collection(
        "c", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
    )
    client.upsert("c", POINTS)
    client.delete("c", points_selector=models.PointIdsList(points=[3]))


def _scores(client: QdrantClient) -> list[tuple[int | str, float]]:
    return [(p.id, p.score) for p in client.query_points("c", query=QUERY).points]


def test_scores_after_a_reopen_are_the_scores_before_it(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"
    client = acquire_client(path)
    _fill(client)
    before = _scores(client)
    release_client(path)
    reopened = acquire_client(path)
    try:
        assert _scores(reopened) == before  # bit for bit, not approximately
        reopened.upsert("c", [models.PointStruct(id=4, vector=[1.0, 2.0, 2.0, 0.0])])
        assert len(_scores(reopened)) == 3  # a point added after the reopen is searched
    finally:
        release_client(path)


def test_qdrant_local_mode_alone_still_scores_differently_after_a_reopen(tmp_path: Path) -> None:
    """The upstream behaviour the workaround is for: when this fails, qdrant-client loads
    vectors as it writes them and ``vectors_as_written`` has become a no-op."""
    path = tmp_path / "plain"
    client = QdrantClient(path=str(path))
    _fill(client)
    before = _scores(client)
    client.close()
    client = QdrantClient(path=str(path))
    try:
        after = _scores(client)
    finally:
        client.close()
    assert [i for i, _ in after] == [i for i, _ in before]
    assert after != before
