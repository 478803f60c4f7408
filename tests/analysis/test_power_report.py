"""recommend-power on a constructed curve, and the report built from the committed reference
rows: every plot it references is embedded, nothing is fetched from elsewhere."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from dlbench.analysis.load import load_rows
from dlbench.analysis.power import recommend_power
from dlbench.results.published import PACKAGED_DIR
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import run_cli

# limit W: (samples/s, J per sample). Least energy: 400 W; least energy x delay: 500 W;
# least energy within 10 % of the fastest: 500 W; within 20 %: 400 W.
CURVE = {300: (600, 0.50), 400: (850, 0.47), 500: (950, 0.50), 600: (990, 0.56), 700: (1000, 0.63)}


def _power_csv(path):
    rows = [
        benchmark_row(model="vit", samples_per_s=rate, energy_per_sample_j=joules, power_limit_w=w)
        for w, (rate, joules) in CURVE.items()
    ]
    rows.append(benchmark_row(model="resnet50", energy_per_sample_j=0.2, power_limit_w=700))
    return write_rows(path, rows)


def test_recommend_power_picks_each_criterion_on_a_known_curve(tmp_path):
    rows = load_rows([_power_csv(tmp_path / "power.csv")])
    [pick] = recommend_power(rows, max_slowdown_pct=10).to_dict("records")  # resnet50: 1 limit
    assert (pick["model"], pick["limits_measured"]) == ("vit", 5)
    assert pick["least_energy_w"] == 400
    assert pick["least_edp_w"] == 500
    assert pick["within_slowdown_w"] == 500
    assert pick["within_slowdown_energy_saved_pct"] == pytest.approx(100 * (1 - 0.50 / 0.63))
    [loose] = recommend_power(rows, max_slowdown_pct=20).to_dict("records")
    assert loose["within_slowdown_w"] == 400


def test_recommend_power_cli_and_its_errors(tmp_path):
    out = run_cli("recommend-power", str(_power_csv(tmp_path / "power.csv")))
    assert out.returncode == 0, out.stderr
    assert "vit" in out.stdout and "500" in out.stdout
    plain = write_rows(tmp_path / "plain.csv", [benchmark_row()])
    out = run_cli("recommend-power", str(plain))
    assert out.returncode == 2 and "power limits" in out.stderr


@pytest.mark.e2e
def test_report_embeds_every_plot_and_says_where_environments_differ(tmp_path):
    reference = sorted(PACKAGED_DIR.glob("*.csv"))
    sources = [p for p in reference if "bare-ddp" not in p.name]  # the yardstick's own CSV
    sources.append(Path(__file__).parent / "data" / "scaling-h200.csv")
    sources.append(_power_csv(tmp_path / "power.csv"))
    out_dir = tmp_path / "report"
    out = run_cli("report", *map(str, sources), "-o", str(out_dir), "--baseline", "H100")
    assert out.returncode == 0, out.stderr
    pngs = sorted(out_dir.glob("*.png"))
    page = (out_dir / "report.html").read_text()
    images = re.findall(r"<img [^>]*src='([^']+)'", page)
    assert len(images) == len(pngs) >= 5
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in images]
    assert embedded == [p.read_bytes() for p in pngs]
    assert not re.search(r"(src|href)=['\"](?!data:)", page)  # opens offline
    for title in ("How these machines compare", "Speed-up against the baseline, pair by pair",
                  "Scaling efficiency", "Power limits"):  # fmt: skip
        assert f"<h2>{title}</h2>" in page
    # the H100 rows come from hosts of 16, 32 and 64 cores now: the note names the code
    assert re.search(r"differ in [^<]*code: [^<]*18695e1[^<]* vs ", page)
    summary = (out_dir / "report.md").read_text()
    for name in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", summary):
        assert (out_dir / name).is_file()
    assert "| vit" in summary


def test_report_marks_host_bound_rows_and_rows_from_concurrent_shards(tmp_path):
    h100 = [
        benchmark_row(model="resnet50", samples_per_s=2400.0, gpu_busy_pct=62.0, host_bound=True),
        benchmark_row(model="vit", samples_per_s=2500.0, gpu_busy_pct=99.0, host_bound=False),
    ]
    h200 = [
        benchmark_row(
            model=m, samples_per_s=r, gpu_name="NVIDIA H200", host_bound=False, shard="1/3"
        )
        for m, r in (("resnet50", 3800.0), ("vit", 2700.0))
    ]
    csv = write_rows(tmp_path / "rows.csv", h100 + h200)
    out_dir = tmp_path / "report"
    out = run_cli("report", str(csv), "-o", str(out_dir), "--baseline", "H100")
    assert out.returncode == 0, out.stderr
    summary = (out_dir / "report.md").read_text()
    speedups = summary[summary.index("## Speed-up") :]
    resnet = next(line for line in speedups.splitlines() if "| resnet50" in line)
    vit = next(line for line in speedups.splitlines() if "| vit" in line)
    assert "host-bound" in resnet and "host-bound" not in vit
    assert "measure the host's kernel launches" in summary
    assert "while other shards ran on the same host" in summary


def test_report_puts_the_decode_ratio_beside_the_bandwidth_ratio(tmp_path):
    def generation(gpu: str, decode: float, peak: float) -> dict:
        return benchmark_row(
            model="llm_1b",
            mode="infer",
            precision="bf16-true",
            batch_size=1,
            prompt_len=128,
            new_tokens=128,
            generation_path="compiled+cuda_graph",
            gpu_name=gpu,
            decode_tokens_per_s=decode,
            decode_hbm_tb_s=decode * 2.47e9 / 1e12,
            peak_hbm_tb_s=peak,
            hbm_bandwidth_share=decode * 2.47e9 / 1e12 / peak,
        )

    rows = [
        generation("NVIDIA H100 80GB HBM3", 900.0, 3.35),
        generation("NVIDIA H200", 1250.0, 4.8),
    ]
    native = generation("NVIDIA H100 80GB HBM3", 1400.0, 3.35)
    rows.append({**native, "llm_impl": "native"})  # another implementation: another line
    csv = write_rows(tmp_path / "gen.csv", rows)
    out = run_cli("report", str(csv), "-o", str(tmp_path / "r"), "--baseline", "H100")
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "report.md").read_text()
    section = summary[summary.index("## Generation against memory bandwidth") :]
    h200 = next(line for line in section.splitlines() if "NVIDIA H200 " in line)
    assert "1.39" in h200 and "1.43" in h200  # 1250/900 beside 4.8/3.35, not 1250/1400
    decode = section.split("\n## ")[0]
    assert "| native " in decode and decode.count("| NVIDIA H100") == 2


def test_report_gives_the_batch_1_latency_ratio_between_gpus(tmp_path):
    def latency(gpu: str, p50: float, compiled: bool = False, at: str = "10:00", **more) -> dict:
        return benchmark_row(
            model="resnet50", mode="infer", batch_size=1, gpu_name=gpu, cuda_graphs=True,
            compile=compiled, gpu_busy_pct=97.0, latency_p50_ms=p50, latency_p90_ms=p50 * 1.01,
            latency_p99_ms=p50 * 1.05, samples_per_s=1000 / p50,
            timestamp=f"2026-11-23T{at}:00+00:00", **more,
        )  # fmt: skip

    rows = [latency("NVIDIA H100 80GB HBM3", 1.00), latency("NVIDIA H200", 0.80)]
    # a newer compiled H100 row is no baseline for the eager H200 row: like with like only
    rows.append(latency("NVIDIA H100 80GB HBM3", 0.50, compiled=True, at="11:00"))
    # nor one that ran another attention kernel (--attention)
    rows.append(latency("NVIDIA H100 80GB HBM3", 0.40, at="12:00", attention="flash"))
    rows.append(benchmark_row(model="resnet50", mode="infer", batch_size=256))  # not batch 1
    csv = write_rows(tmp_path / "lat.csv", rows)
    out = run_cli("report", str(csv), "-o", str(tmp_path / "r"), "--baseline", "H100")
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "report.md").read_text()
    section = summary[summary.index("## Latency at batch 1") :].split("## ")[1]
    h200 = next(line for line in section.splitlines() if "NVIDIA H200 " in line)
    assert "1.25" in h200 and "0.8" in h200  # answers 1.25x faster: p50 1.00 / 0.80 ms
    assert section.count("resnet50") == 4  # the batch-256 row is no latency row


@pytest.mark.e2e
def test_report_ranks_gpus_by_cost_and_lists_the_rows_it_left_out(tmp_path):
    rows = [
        benchmark_row(gpu_name="NVIDIA H100 80GB HBM3", samples_per_s=4000.0, verdict="valid"),
        benchmark_row(gpu_name="NVIDIA H200", samples_per_s=4400.0, verdict="valid"),
        benchmark_row(gpu_name="NVIDIA H200", batch_size=1, samples_per_s=90.0,
                      verdict="invalid", verdict_reasons="host_bound"),
    ]  # fmt: skip
    csv = write_rows(tmp_path / "cost.csv", rows)
    out = run_cli(
        "report", csv, "-o", tmp_path / "r", "--usd-per-hour", "H100=2.0",
        "--usd-per-hour", "H200=3.0",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "report.md").read_text()
    cost = summary[summary.index("## Cost per million samples") :].split("\n## ")[0]
    lines = [line for line in cost.splitlines() if "NVIDIA" in line]
    assert "H100" in lines[0] and "0.14" in lines[0]  # 2.0 / 3600 / 4000 x 1e6 = 0.139
    assert "H200" in lines[1] and "0.19" in lines[1]
    left_out = summary[summary.index("## Rows left out of every ratio") :].split("\n## ")[0]
    assert "host_bound" in left_out and left_out.count("NVIDIA") == 1
    bad = run_cli("report", csv, "-o", tmp_path / "r2", "--usd-per-hour", "H100=cheap")
    assert bad.returncode == 2 and "--usd-per-hour" in bad.stderr


def test_a_report_on_invalid_rows_only_is_still_written_and_says_why(tmp_path):
    rows = [benchmark_row(verdict="invalid", verdict_reasons="noisy", batch_size=b) for b in (1, 2)]
    out = run_cli("report", write_rows(tmp_path / "cpu.csv", rows), "-o", tmp_path / "r")
    assert out.returncode == 0, out.stderr
    summary = (tmp_path / "r" / "report.md").read_text()
    left_out = summary[summary.index("## Rows left out of every ratio") :].split("\n## ")[0]
    assert left_out.count("noisy") == 2


def test_a_report_on_a_real_plan_says_nothing_but_where_it_wrote(tmp_path):
    """A full default-plan CSV (27 rows, every column): pandas' fragmentation warning, raised
    by converting the columns one by one, once reached the user's terminal."""
    from pathlib import Path

    rows = Path(__file__).parents[2] / "src/dlbench/published/default-pt2.11-cu13.0-h200.csv"
    out = run_cli("report", str(rows), "-o", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr, out.stderr
