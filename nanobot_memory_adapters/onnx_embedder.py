"""A sentence-transformers model run through ONNX Runtime, without loading torch.

Why: loading torch and sentence-transformers is most of a new process's first turn
(~6 s here); ONNX Runtime and the tokenizer load in well under a second. The model is
exported once, locally, from the weights already on disk (torch's TorchScript exporter;
nothing is downloaded) into a cache folder keyed by those weights; every later process
loads only the export. Tokenization (``tokenizers``, the model's own ``tokenizer.json``),
truncation (the model's ``max_seq_length``), mean pooling and normalization follow the
model's sentence-transformers modules; a model that needs anything else is refused.

The vectors match sentence-transformers' within float noise (max abs difference ~2e-7
on MiniLM, as large as sentence-transformers' own batch-versus-single difference; tests in
``tests/backends/test_mem0_onnx.py``), not bit for bit; the runtime in use is recorded in
every run manifest (docs/mem0.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.sdk_output import quiet_progress

__all__ = [
    "ONNX_RUNTIMES",
    "EmbeddingRuntime",
    "OnnxEmbedderError",
    "OnnxSentenceEmbedder",
    "SentenceModelLayout",
    "default_runtime",
    "export_dir_for",
    "load_onnx_embedder",
]

#: Bump when the export changes (inputs, opset, wrapper): old exports are not reused.
EXPORT_FORMAT = 2
OPSET = 17
BATCH_SIZE = 32  # sentence-transformers' default encode batch
MIN_FILL = 0.8  # a batch runs at its longest text's width: see _batches
#: Padded tokens per batch (texts x the longest's width). On one CPU thread MiniLM runs
#: faster in small batches of long texts: capped at 512, 150 LongMemEval-S-sized turns
#: (~256 tokens) take 0.824x [0.802, 0.846] the CPU of batches of 32, conv-26's 419 turns
#: 0.872x [0.845, 0.891] (paired, n = 6, 2026-11-28); the vectors are the same.
BATCH_TOKENS = 512
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


EmbeddingRuntime = Literal["sentence_transformers", "onnx", "onnx_int8"]
#: The runtimes served by ``load_onnx_embedder``. ``onnx_int8`` is the same export with its
#: weights quantized to int8 (ONNX Runtime's dynamic quantization per channel, done locally
#: once): ~1.9-2.4x less CPU per text, but other vectors (cosine to the float ones ~0.99),
#: hence other results; an option, never a default (docs/mem0.md, "int8").
ONNX_RUNTIMES: tuple[EmbeddingRuntime, ...] = ("onnx", "onnx_int8")
#: The int8 export's folder: the float export's name plus this (bump it when the
#: quantization changes: an old int8 export is then not reused).
INT8_SUFFIX = "-int8pc"


def default_runtime(model_path: str | None) -> EmbeddingRuntime:
    """The one rule for every local embedder: ONNX Runtime for the bundled MiniLM (checked
    to give sentence-transformers' vectors and results, docs/mem0.md), sentence-transformers
    for a model of the user's own (unless they choose ``onnx`` for it)."""
    return "onnx" if model_path is None else "sentence_transformers"


class OnnxEmbedderError(RuntimeError):
    """The model cannot run through ONNX Runtime here; the message says why and what to do."""


@dataclass(frozen=True)
class SentenceModelLayout:
    """What the sentence-transformers folder says the model does (checked, not assumed)."""

    path: Path
    weights: Path
    max_seq_length: int
    dims: int
    normalize: bool

    @classmethod
    def read(cls, model_path: str | Path) -> SentenceModelLayout:
        path = Path(model_path).expanduser()
        fix = 'set embedding_runtime to "sentence_transformers"'
        weights = next((path / n for n in WEIGHT_FILES if (path / n).is_file()), None)
        if weights is None or not (path / "tokenizer.json").is_file():
            raise OnnxEmbedderError(
                f"{path} is not a local sentence-transformers model folder with its weights "
                f"at the top and a tokenizer.json; {fix}"
            )
        try:
            modules = json.loads((path / "modules.json").read_text())
            types = [m["type"].rsplit(".", 1)[-1] for m in modules]
            pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
            pooling = json.loads((path / pooling_dir / "config.json").read_text())
            sbert = json.loads((path / "sentence_bert_config.json").read_text())
        except (OSError, ValueError, KeyError, StopIteration) as exc:
            raise OnnxEmbedderError(
                f"{path}: cannot read its sentence-transformers modules ({exc}); {fix}"
            ) from exc
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
        st_config = _json_or_empty(path / "config_sentence_transformers.json")
        if sbert.get("do_lower_case") or st_config.get("default_prompt_name"):
            raise OnnxEmbedderError(
                f"{path}: the model lower-cases in sentence-transformers or has a default "
                f"prompt, which the ONNX runtime does not reproduce; {fix}"
            )
        if types[:2] != ["Transformer", "Pooling"] or modes != {"pooling_mode_mean_tokens"} \
                or set(types[2:]) - {"Normalize"}:
            raise OnnxEmbedderError(
                f"{path}: the ONNX runtime supports a transformer with mean pooling (and "
                f"optional normalization); this model has {types} with {sorted(modes)}; {fix}"
            )
        return cls(
            path=path,
            weights=weights,
            max_seq_length=int(sbert.get("max_seq_length") or _model_limit(path)),
            dims=int(pooling["word_embedding_dimension"]),
            normalize="Normalize" in types,
        )

    def digest(self) -> str:
        """Names the export: the weights, tokenizer and modules by path, size and mtime
        (cheap at every start; the export records the weights' sha256 as well)."""
        h = hashlib.sha256(f"format={EXPORT_FORMAT};opset={OPSET}".encode())
        for f in sorted(p for p in self.path.rglob("*") if p.is_file() and p.suffix != ".md"):
            st = f.stat()
            h.update(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        return h.hexdigest()[:16]


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _model_limit(path: Path) -> int:
    """sentence-transformers' fallback: the tokenizer's limit, capped by the positions."""
    limits = [int(v) for v in (
        _json_or_empty(path / "tokenizer_config.json").get("model_max_length"),
        _json_or_empty(path / "config.json").get("max_position_embeddings"),
    ) if isinstance(v, int | float) and 0 < v < 1_000_000]
    return min(limits) if limits else 512


def default_cache_dir() -> Path:
    """``$NANOBOT_MEMORY_CACHE_DIR``, else ``nanobot-memory`` in ``$XDG_CACHE_HOME``
    (default ``~/.cache``)."""
    configured = os.environ.get("NANOBOT_MEMORY_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nanobot-memory"


def export_dir_for(layout: SentenceModelLayout, cache_dir: str | Path | None = None) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return root / "onnx" / f"{layout.path.name}-{layout.digest()}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export(layout: SentenceModelLayout, target: Path) -> Path:
    """Export the transformer to ``target/model.onnx`` (torch's TorchScript exporter,
    dynamic batch and sequence axes) with the tokenizer beside it; atomic: a folder is
    complete or absent. Needs torch and transformers (this runs once per model)."""
    try:
        import onnx  # noqa: F401  (torch's exporter and the optimizer need it)
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise OnnxEmbedderError(
            f"exporting {layout.path} to ONNX needs torch, transformers and onnx ({exc}); "
            "run: pip install 'nanobot-memory-adapters[mem0]', or set embedding_runtime "
            'to "sentence_transformers"'
        ) from exc
    with _publishing(target) as work:
        with quiet_progress():
            # eager attention exports as plain MatMul/Softmax, which ONNX Runtime's BERT
            # optimizer fuses (fuse_bert); the SDPA export is left unfused
            model = AutoModel.from_pretrained(
                str(layout.path), local_files_only=True, attn_implementation="eager"
            )
        model.eval()

        class LastHiddenState(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(
                    input_ids=input_ids, attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).last_hidden_state

        sample = torch.ones((2, 8), dtype=torch.int64)
        axes = {0: "batch", 1: "sequence"}
        # the tracer's warnings are about branches constant for an encoder (no causal
        # mask, no cache); the parity test checks the result on every batch shape
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(model), (sample, sample, torch.zeros_like(sample)),
                str(work / "model.onnx"),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes,
                              "token_type_ids": axes, "last_hidden_state": axes},
                opset_version=OPSET, dynamo=False,
            )
        fused = fuse_bert(work / "model.onnx", model.config)
        shutil.copy2(layout.path / "tokenizer.json", work / "tokenizer.json")
        (work / "export.json").write_text(json.dumps({
            "format": EXPORT_FORMAT, "opset": OPSET, "source": str(layout.path),
            "fused": fused,
            "weights_sha256": _sha256(layout.weights), "torch": torch.__version__,
            "max_seq_length": layout.max_seq_length, "dims": layout.dims,
            "normalize": layout.normalize,
        }, indent=2) + "\n")
    return target


@contextlib.contextmanager
def _publishing(target: Path) -> Iterator[Path]:
    """A work folder beside ``target`` that becomes ``target`` when the block ends without
    an error: a folder is complete or absent, and when another process published the same
    folder first, its copy stands."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        yield work
        try:
            work.rename(target)
        except OSError:  # another process finished the same folder first
            if not (target / "model.onnx").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fuse_bert(path: Path, config: Any) -> dict[str, int]:
    """Fuse a BERT-family graph in place with ONNX Runtime's own transformer optimizer
    (attention, skip layer norms, embeddings; ~13 % less CPU on 200-word texts, the same
    vectors within 1e-6). Python-level fusions only (``opt_level=0``), so the file stays
    portable; the session applies its own optimizations when it loads. Another family,
    or an optimizer that fails, keeps the plain export."""
    if getattr(config, "model_type", None) != "bert":
        return {}
    try:
        from onnxruntime.transformers import optimizer

        optimized = optimizer.optimize_model(
            str(path), model_type="bert", num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size), opt_level=0, use_gpu=False,
        )
        stats = {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}
        optimized.save_model_to_file(str(path))
    except ImportError as exc:  # not a plain export saved for good: say what is missing
        raise OnnxEmbedderError(
            f"ONNX Runtime's BERT optimizer cannot be imported ({exc}); run: pip install "
            "'nanobot-memory-adapters[mem0]'"
        ) from exc
    except Exception as exc:  # the plain export is correct, only slower
        logger.warning("ONNX Runtime's BERT optimizer failed ({}); keeping the plain export",
                       exc)
        return {}
    return stats


_export_lock = threading.Lock()
_loaded: dict[tuple[str, int | None], OnnxSentenceEmbedder] = {}


def _runtime_modules() -> tuple[Any, Any]:
    try:
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise OnnxEmbedderError(
            f'embedding_runtime "onnx" needs onnxruntime ({exc}); run: pip install '
            "'nanobot-memory-adapters[mem0]', or set embedding_runtime to "
            '"sentence_transformers"'
        ) from exc
    return ort, Tokenizer


def _batches(lengths: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, stop)`` runs of ``lengths`` (sorted longest first): at most ``BATCH_SIZE``
    texts and ``BATCH_TOKENS`` padded tokens (a longer text goes alone), and a text
    shorter than ``MIN_FILL`` of its batch's longest starts a new one. A batch runs at its
    longest text's width: one session's turns (5 to 100+ tokens) in a single batch cost
    1.95x their own tokens, 1.08x so (LoCoMo conv-26), and ~2x the time."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i, n in enumerate(lengths):
        if i > start and (i - start >= BATCH_SIZE or n < MIN_FILL * lengths[start]
                          or (i - start + 1) * lengths[start] > BATCH_TOKENS):
            runs.append((start, i))
            start = i
    if lengths:
        runs.append((start, len(lengths)))
    return runs


class OnnxSentenceEmbedder:
    """``encode(texts)`` as sentence-transformers computes it, on ONNX Runtime."""

    runtime: EmbeddingRuntime = "onnx"

    def __init__(self, export_path: Path, *, threads: int | None = None) -> None:
        ort, Tokenizer = _runtime_modules()
        meta = json.loads((export_path / "export.json").read_text())
        self.export_path = export_path
        self.metadata: dict[str, Any] = meta
        self.runtime = "onnx_int8" if meta.get("quantized") else "onnx"
        self.dims = int(meta["dims"])
        self.normalize = bool(meta["normalize"])
        self.onnxruntime_version: str = ort.__version__
        tokenizer = Tokenizer.from_file(str(export_path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=int(meta["max_seq_length"]))
        self._pad_id = int((tokenizer.padding or {}).get("pad_id", 0))
        tokenizer.no_padding()  # each batch is padded to its own longest text (encode)
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or int(os.environ.get("OMP_NUM_THREADS") or 0)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(export_path / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )

    def get_sentence_embedding_dimension(self) -> int:
        return self.dims

    def encode(self, texts: Sequence[str]) -> Any:
        """One float32 row per text (numpy), in order."""
        import numpy as np

        encoded = self._tokenizer.encode_batch(list(texts))
        # longest first, as sentence-transformers batches: less padding per batch
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].ids))
        rows: list[Any] = []
        for start, stop in _batches([len(encoded[i].ids) for i in order]):
            batch = [encoded[i] for i in order[start:stop]]
            width = len(batch[0].ids)  # the longest: the batch is sorted
            ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            types = np.zeros((len(batch), width), dtype=np.int64)
            for row, e in enumerate(batch):
                n = len(e.ids)
                ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
            (output,) = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            )
            hidden = np.asarray(output, dtype=np.float32)
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            if self.normalize:
                norms = np.linalg.norm(pooled, axis=1, keepdims=True)
                pooled = pooled / np.clip(norms, 1e-12, None)
            rows.append(pooled.astype(np.float32))
        if not rows:
            return np.zeros((0, self.dims), dtype=np.float32)
        out = np.empty((len(order), self.dims), dtype=np.float32)
        out[order] = np.concatenate(rows)
        return out


class _DropQuantizerAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize_int8(export_path: Path, target: Path) -> Path:
    """``export_path``'s model with int8 weights (ONNX Runtime's dynamic quantization:
    MatMul weights per output channel, activations quantized at run time) into
    ``target``; atomic like ``export``. Per channel: as fast as per tensor on MiniLM and
    much closer to the float vectors (cosine 0.992 against 0.924 on 200-word turns)."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise OnnxEmbedderError(
            f'embedding_runtime "onnx_int8" needs onnx and onnxruntime ({exc}); run: pip '
            "install 'nanobot-memory-adapters[mem0]', or set embedding_runtime to \"onnx\""
        ) from exc
    with _publishing(target) as work:
        # the fused graph's contrib ops defeat shape inference: their outputs are float.
        # The quantizer's advice to pre-process (static quantization's) goes to the root
        # logger: it is not the user's business.
        advice = _DropQuantizerAdvice()
        logging.getLogger().addFilter(advice)
        try:
            quantize_dynamic(str(export_path / "model.onnx"), str(work / "model.onnx"),
                             weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            logging.getLogger().removeFilter(advice)
        shutil.copy2(export_path / "tokenizer.json", work / "tokenizer.json")
        meta = json.loads((export_path / "export.json").read_text())
        meta["quantized"] = {"method": "onnxruntime.quantize_dynamic", "weights": "int8",
                             "per_channel": True, "from": export_path.name}
        (work / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


def _make_once(target: Path, make: Callable[[], object], what: str, fix: str) -> None:
    """Run ``make`` unless ``target`` already holds a finished folder (one maker per
    process; ``_publishing`` settles races between processes). Any failure is one
    ``OnnxEmbedderError`` line naming ``what`` and the ``fix``."""
    if (target / "export.json").is_file():
        return
    with _export_lock:
        if (target / "export.json").is_file():
            return
        logger.info("{} once, into {}", what, target)
        try:
            make()
        except OnnxEmbedderError:
            raise
        except OSError as exc:
            raise OnnxEmbedderError(
                f"cannot write into {target.parent} ({exc}); set NANOBOT_MEMORY_CACHE_DIR "
                f"to a writable folder, or {fix}") from exc
        except Exception as exc:
            raise OnnxEmbedderError(
                f"{what} failed ({type(exc).__name__}: {exc}); {fix}") from exc


def forget_sessions() -> None:
    """Drop the loaded sessions, so the next build loads its model again (benchmarks use it
    to charge every round the load a fresh process pays)."""
    with _export_lock:
        _loaded.clear()


def load_onnx_embedder(
    model_path: str | Path, *, cache_dir: str | Path | None = None, threads: int | None = None,
    runtime: EmbeddingRuntime = "onnx",
) -> OnnxSentenceEmbedder:
    """The embedder for ``model_path`` on ``runtime`` (``onnx`` or ``onnx_int8``),
    exporting (and quantizing) it first if this cache has none."""
    if runtime not in ONNX_RUNTIMES:
        raise ValueError(f"runtime {runtime!r} is not served by ONNX Runtime")
    layout = SentenceModelLayout.read(model_path)
    _runtime_modules()  # a missing onnxruntime is said before an export, not after it
    target = export_dir_for(layout, cache_dir)
    _make_once(target, lambda: export(layout, target), f"exporting {layout.path} to ONNX",
               'set embedding_runtime to "sentence_transformers"')
    if runtime == "onnx_int8":
        plain, target = target, target.with_name(target.name + INT8_SUFFIX)
        _make_once(target, lambda: quantize_int8(plain, target),
                   f"quantizing {plain} to int8", 'set embedding_runtime to "onnx"')
    key = (str(target), threads)
    with _export_lock:
        if key not in _loaded:  # one session per export: adapters share its thread pool
            _loaded[key] = OnnxSentenceEmbedder(target, threads=threads)
        return _loaded[key]
