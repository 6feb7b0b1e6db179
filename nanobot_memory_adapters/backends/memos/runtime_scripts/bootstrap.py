# ruff: noqa: E402 - imports follow the patches they must come after
"""Runs in MemOS's venv (copied there by backends/memos/server.py): starts MemOS offline,
with the patches listed in the launcher's state file. Never imported by this package."""
import os
import sys

# 1. chonkie tokenizer: MemOS configures "gpt2" (a hub download) -> chonkie's offline tokenizer.
import memos.chunkers.sentence_chunker as _sentence_chunker

_OFFLINE_TOKENIZER = os.environ.get("NBM_MEMOS_CHUNK_TOKENIZER", "word")
_orig_chunker_init = _sentence_chunker.SentenceChunker.__init__


def _chunker_init(self, config):
    if getattr(config, "tokenizer_or_token_counter", None) == "gpt2":
        config.tokenizer_or_token_counter = _OFFLINE_TOKENIZER
    _orig_chunker_init(self, config)


_sentence_chunker.SentenceChunker.__init__ = _chunker_init

# 2. local embeddings: MemOS's own sentence_transformer embedder on a local model path.
import memos.api.config as _api_config

if os.environ.get("NBM_MEMOS_EMBEDDER") == "local":
    _model_path = os.environ["NBM_MEMOS_EMBEDDER_PATH"]

    def _embedder_config():
        return {
            "backend": "sentence_transformer",
            "config": {"model_name_or_path": _model_path, "trust_remote_code": False},
        }

    _api_config.APIConfig.get_embedder_config = staticmethod(_embedder_config)

# 3. pgvector values arrive as text from psycopg2: register a caster for the vector type.
import psycopg2
import psycopg2.extensions

_conn = psycopg2.connect(
    host=os.environ["POSTGRES_HOST"],
    port=os.environ.get("POSTGRES_PORT", "5432"),
    user=os.environ["POSTGRES_USER"],
    dbname=os.environ["POSTGRES_DB"],
)
_conn.autocommit = True
with _conn.cursor() as _cur:
    _cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
    _cur.execute("SELECT oid FROM pg_type WHERE typname = 'vector'")
    (_vector_oid,) = _cur.fetchone()
_conn.close()


def _cast_vector(value, _cursor):
    if value is None:
        return None
    body = value.strip().strip("[]")
    return [float(x) for x in body.split(",")] if body else []


_VECTOR = psycopg2.extensions.new_type((_vector_oid,), "VECTOR", _cast_vector)
psycopg2.extensions.register_type(_VECTOR)

# 4. optional: apply the search `filter` in postgres vector search (2.0.33 drops it there).
if os.environ.get("NBM_MEMOS_PATCH_PG_FILTER", "1") == "1":
    from memos.graph_dbs import postgres as _pg_graph

    _orig_search = _pg_graph.PostgresGraphDB.search_by_embedding

    def _search_by_embedding(self, vector, top_k=5, scope=None, status=None, threshold=None,
                             search_filter=None, user_name=None, filter=None, **kwargs):
        if not filter:
            return _orig_search(self, vector, top_k=top_k, scope=scope, status=status,
                                threshold=threshold, search_filter=search_filter,
                                user_name=user_name, filter=filter, **kwargs)
        user_name = user_name or self.user_name
        conditions = ["embedding IS NOT NULL"]
        params = []
        if user_name:
            conditions.append("user_name = %s")
            params.append(user_name)
        if scope:
            conditions.append("properties->>'memory_type' = %s")
            params.append(scope)
        if status:
            conditions.append("properties->>'status' = %s")
            params.append(status)
        else:
            conditions.append(
                "(properties->>'status' = 'activated' OR properties->>'status' IS NULL)"
            )
        for key, value in (search_filter or {}).items():
            if not self._is_safe_field_name(key):
                raise ValueError(f"Invalid filter field: {key}")
            conditions.append(f"properties->>'{key}' = %s")
            params.append(str(value))
        filter_sql = self._build_filter_where_clause(filter, params)
        if filter_sql:
            conditions.append(f"({filter_sql})")
        where = " AND ".join(conditions)
        conn = self._get_conn()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT id, 1 - (embedding <=> %s::vector) AS score "
                    f"FROM {self.schema}.memories "
                    f"WHERE {where} ORDER BY embedding <=> %s::vector LIMIT %s",
                    (vector, *params, vector, top_k),
                )
                rows = cur.fetchall()
        finally:
            self._put_conn(conn)
        out = []
        for row in rows:
            score = float(row[1])
            if threshold is None or score >= threshold:
                out.append({"id": row[0], "score": score})
        return out

    _pg_graph.PostgresGraphDB.search_by_embedding = _search_by_embedding

# 5. delete-by-filter touches `naive_mem_cube.pref_mem`, which NaiveMemCube lacks when
#    preference memory is off: the text memories are deleted, then the call reports failure.
from memos.mem_cube.navie import NaiveMemCube as _NaiveMemCube

if not hasattr(_NaiveMemCube, "pref_mem"):
    _NaiveMemCube.pref_mem = None

# 6. MemOS's Redis auto-initialization falls back to localhost:6379 and finally spawns
#    `redis-server --port 6379` on every interface. Only the launcher's Redis is used here.
from memos.mem_scheduler.webservice_modules import redis_service as _redis_service


def _auto_initialize_redis(self):
    self._redis_conn = None
    if os.environ.get("NBM_MEMOS_REDIS") != "1":
        return False
    import redis

    host = os.environ["MEMSCHEDULER_REDIS_HOST"]
    port = int(os.environ["MEMSCHEDULER_REDIS_PORT"])
    db = int(os.environ.get("MEMSCHEDULER_REDIS_DB", "0"))
    conn = redis.Redis(host=host, port=port, db=db, decode_responses=True)
    try:
        if not conn.ping():
            return False
    except Exception:
        return False
    self._redis_conn = conn
    self.redis_host, self.redis_port, self.redis_db = host, port, db
    self.redis_password = None
    self.socket_timeout = self.socket_connect_timeout = None
    return True


_redis_service.RedisSchedulerModule.auto_initialize_redis = _auto_initialize_redis

import uvicorn

uvicorn.run(
    "memos.api.server_api:app",
    host="127.0.0.1",
    port=int(sys.argv[1]),
    workers=1,
    log_level="info",
)
