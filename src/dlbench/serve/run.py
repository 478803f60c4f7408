"""`dlbench serve`: a scenario's load against one model on one device, one row (`run_kind` serve).

Before any load the server is warmed (every bucket compiled and run) and two references of the
same model are measured: its offline throughput at the largest batch, and its batch-1 latency
(single stream). A server load runs at least `--queries` queries and `--min-duration` seconds;
`--find-qps` searches the highest rate whose p99 meets the bound (serve.search), the offline
throughput its upper end. LLMs are refused: serving them needs continuous batching."""

from __future__ import annotations

import math

from dlbench.console import stderr
from dlbench.engine.acceleration.precision import plan_precision
from dlbench.engine.distribution.devices import plan_devices
from dlbench.results.environment import collect_environment
from dlbench.results.row import RowBuilder, identity
from dlbench.results.store import CsvStore
from dlbench.serve.load import (
    Batcher,
    ServeResult,
    offline_arrivals,
    offline_reference,
    poisson_arrivals,
    serve_load,
    serve_single_stream,
)
from dlbench.serve.model_server import ModelServer
from dlbench.serve.search import find_qps, passes
from dlbench.serve.settings import ServeSettings
from dlbench.workloads import get_workload

# MLPerf Inference's p99 bounds for the server scenario: ResNet-50's for vision models, BERT's
# for text (vit and the others have none of their own)
SLO_P99_MS = {"vision": 15.0, "segmentation": 15.0, "text": 130.0}
REFERENCE_BATCHES = 8  # the offline reference's first estimate: batches of the largest size
REFERENCE_MIN_S = 1.0  # the offline reference lasts at least this long
REFERENCE_QUERIES = 64  # the batch-1 reference: this many queries one at a time


def execute_serve(s: ServeSettings) -> dict[str, object]:
    """Warm, measure the references and the scenario's load; append and return the row."""
    s.checked()
    store = CsvStore(s.output)
    store.check_writable()
    workload = get_workload(s.model)
    shape = workload.shape(s.width, s.height, s.seq_len)
    devices = plan_devices(s.accelerator, "1")
    precision = plan_precision(s.precision, devices.device_type, "infer")
    precision.apply_matmul_settings()
    env = collect_environment(devices.device_type)
    device = _device(devices.device_type)
    server = ModelServer(
        workload,
        shape,
        device,
        precision,
        s.max_batch,
        s.compile,
        s.seed,
        s.cuda_graphs,
        s.channels_last,
    )
    stderr.print(f"serving {s.model} ({s.scenario}): warming {len(server.buckets)} buckets")
    server.warm()
    batcher = Batcher(s.max_batch, s.batch_timeout_ms / 1e3)
    references = _references(server, batcher)
    slo = s.slo_p99_ms or SLO_P99_MS.get(workload.family, SLO_P99_MS["vision"])
    result, parts = _scenario_load(s, server, batcher, slo, references)
    settings = {
        "model": s.model,
        "mode": "infer",
        "family": workload.family,
        "sample_unit": workload.sample_unit,
        "precision": s.precision,
        "batch_size": s.max_batch,
        "accelerator": devices.device_type,
        "devices": 1,
        "compile": s.compile,
        "seed": s.seed,
        **workload.shape_columns(shape),
        **server.columns(),
    }
    batching = {
        "serve_scenario": s.scenario,
        "serve_max_batch": s.max_batch,
        "serve_batch_timeout_ms": s.batch_timeout_ms,
        "serve_slo_p99_ms": slo,
        "serve_min_duration_s": s.min_duration,
    }
    row = (
        RowBuilder()
        .add("identity", {**identity(s.run_id, "ok"), "run_kind": "serve"})
        .add("settings", settings)
        .add("the batcher", batching)
        .add("the load", result.columns())
        .include(parts)
        .add("the references", references)
        .add("environment", env)
        .add("tags", s.tag_columns())
        .row()
    )
    store.append(row)
    return row


def _references(server: ModelServer, batcher: Batcher) -> dict[str, object]:
    """The same model offline at its largest batch, and one query at a time."""
    offline = offline_reference(server.run_batch, batcher, REFERENCE_BATCHES, REFERENCE_MIN_S)
    single = serve_single_stream(REFERENCE_QUERIES, server.run_batch)
    return {
        "serve_offline_samples_per_s": offline.achieved_qps,
        "serve_batch1_p50_ms": single.percentile_ms(50),
    }


def _scenario_load(
    s: ServeSettings, server: ModelServer, batcher: Batcher, slo: float, references: dict
) -> tuple[ServeResult, RowBuilder]:
    """The scenario's measured load, and its own parts of the row (the rate, the search)."""
    parts = RowBuilder()
    if s.scenario == "single-stream":
        return serve_single_stream(s.queries, server.run_batch), parts
    if s.scenario == "offline":
        arrivals = offline_arrivals(max(s.queries, s.max_batch))
        return serve_load(arrivals, server.run_batch, batcher), parts

    loads: dict[float, ServeResult] = {}  # the search's loads: the row reports the one found

    def load(qps: float) -> ServeResult:
        count = max(s.queries, math.ceil(qps * s.min_duration))
        arrivals = poisson_arrivals(qps, count, s.seed)
        loads[qps] = serve_load(arrivals, server.run_batch, batcher)
        return loads[qps]

    qps = s.qps or 0.0
    if s.find_qps:
        high = float(references["serve_offline_samples_per_s"])
        search = find_qps(load, slo, high, s.search_budget)
        parts.add("the search", search.columns())
        best = search.best
        qps = best.qps if best else search.points[-1].qps
    result = loads.get(qps) or load(qps)
    parts.add("the rate", {"serve_qps_target": qps, "serve_slo_met": passes(result, qps, slo)})
    return result, parts


def _device(device_type: str):
    import torch

    return (
        torch.device("cuda", torch.cuda.current_device())
        if device_type == "cuda"
        else (torch.device("cpu"))
    )


def show_serve(row: dict[str, object]) -> None:
    """The row's serving figures, a line each."""

    def n(key: str) -> float:
        return float(row[key])  # type: ignore[arg-type]

    lines = [
        f"{row['model']} {row['serve_scenario']}: {row['serve_queries']} queries, "
        f"{n('serve_achieved_qps'):,.1f}/s answered, mean batch {n('serve_mean_batch'):.1f}",
        f"latency p50 {n('latency_p50_ms'):.2f} ms, p90 {n('latency_p90_ms'):.2f} ms, "
        f"p99 {n('latency_p99_ms'):.2f} ms",
        f"offline {n('serve_offline_samples_per_s'):,.1f}/s, batch-1 p50 "
        f"{n('serve_batch1_p50_ms'):.2f} ms",
    ]
    if row.get("serve_points_tried"):
        lines.append(f"found {row.get('serve_qps_found')}/s in {row['serve_points_tried']} points")
    lines.append(f"verdict: {row['verdict']} {row.get('verdict_reasons') or ''}".rstrip())
    print("\n".join(lines))
