"""Peak dense FLOP/s per GPU and precision, and peak memory bandwidth, by exact device name:
the denominators of MFU and of the decode roofline.

Sources (vendor datasheets, dense figures, i.e. half the 'with sparsity' numbers):
- H100 SXM / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet (2023).
- H200 SXM / NVL: NVIDIA H200 Tensor Core GPU datasheet (2024).
- A100 SXM / PCIe: NVIDIA A100 Tensor Core GPU datasheet (2021).
- L4: NVIDIA L4 datasheet (2023). L40S: NVIDIA L40S datasheet (2023).
- RTX 4090: NVIDIA Ada Lovelace architecture whitepaper v1.03, FP32-accumulate tensor rates.
- MI300X: AMD Instinct MI300X data sheet (2023).
Bandwidth: the same datasheets (the tables below state each figure once).
An unknown GPU gets no peak, so its MFU and bandwidth share stay empty rather than wrong."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeakFlops:
    """Dense peak TFLOP/s of one GPU model; `fp32` is the non-tensor-core rate, `fp8` the
    e4m3 tensor-core rate (0: the GPU has no FP8 tensor cores)."""

    fp32: float
    tf32: float
    fp16: float
    bf16: float
    fp8: float
    source: str


H100_SXM = PeakFlops(66.9, 494.7, 989.4, 989.4, 1978.9, "H100 datasheet, SXM5")
H100_PCIE = PeakFlops(51.2, 378.0, 756.0, 756.0, 1513.0, "H100 datasheet, PCIe")
H100_NVL = PeakFlops(60.0, 417.5, 835.5, 835.5, 1670.5, "H100 datasheet, NVL")
H200_NVL = PeakFlops(60.0, 417.5, 835.5, 835.5, 1670.5, "H200 datasheet, NVL")
A100 = PeakFlops(19.5, 156.0, 312.0, 312.0, 0.0, "A100 datasheet")
L4 = PeakFlops(30.3, 60.0, 121.0, 121.0, 242.5, "L4 datasheet")
L40S = PeakFlops(91.6, 183.0, 362.0, 362.0, 733.0, "L40S datasheet")
RTX_4090 = PeakFlops(82.6, 82.6, 165.2, 165.2, 330.3, "Ada whitepaper, FP32 accumulate")
MI300X = PeakFlops(163.4, 653.7, 1307.4, 1307.4, 2614.9, "MI300X data sheet")

# Exact names as torch.cuda.get_device_name() reports them (case-insensitive).
PEAKS: dict[str, PeakFlops] = {
    "nvidia h100 80gb hbm3": H100_SXM,
    "nvidia h100 sxm5 80gb": H100_SXM,
    "nvidia h100 pcie": H100_PCIE,
    "nvidia h100 nvl": H100_NVL,
    "nvidia h200": PeakFlops(66.9, 494.7, 989.4, 989.4, 1978.9, "H200 datasheet, SXM"),
    "nvidia h200 nvl": H200_NVL,
    "nvidia a100-sxm4-80gb": A100,
    "nvidia a100-sxm4-40gb": A100,
    "nvidia a100-pcie-40gb": A100,
    "nvidia a100 80gb pcie": A100,
    "nvidia l4": L4,
    "nvidia l40s": L40S,
    "nvidia geforce rtx 4090": RTX_4090,
    "amd instinct mi300x": MI300X,
}

# Peak device-memory bandwidth in TB/s, by the same exact names.
PEAK_BANDWIDTH_TB_S: dict[str, float] = {
    "nvidia h100 80gb hbm3": 3.35,
    "nvidia h100 sxm5 80gb": 3.35,
    "nvidia h100 pcie": 2.0,
    "nvidia h100 nvl": 3.9,
    "nvidia h200": 4.8,
    "nvidia h200 nvl": 4.8,
    "nvidia a100-sxm4-80gb": 2.039,
    "nvidia a100-sxm4-40gb": 1.555,
    "nvidia a100-pcie-40gb": 1.555,
    "nvidia a100 80gb pcie": 1.935,
    "nvidia l4": 0.3,
    "nvidia l40s": 0.864,
    "nvidia geforce rtx 4090": 1.008,
    "amd instinct mi300x": 5.3,
}

# Form factor by the same exact names (the datasheets name the variants).
FORM_FACTORS: dict[str, str] = {
    "nvidia h100 80gb hbm3": "SXM",
    "nvidia h100 sxm5 80gb": "SXM",
    "nvidia h100 pcie": "PCIe",
    "nvidia h100 nvl": "NVL (PCIe)",
    "nvidia h200": "SXM",
    "nvidia h200 nvl": "NVL (PCIe)",
    "nvidia a100-sxm4-80gb": "SXM",
    "nvidia a100-sxm4-40gb": "SXM",
    "nvidia a100-pcie-40gb": "PCIe",
    "nvidia a100 80gb pcie": "PCIe",
    "nvidia l4": "PCIe",
    "nvidia l40s": "PCIe",
    "nvidia geforce rtx 4090": "PCIe",
    "amd instinct mi300x": "OAM",
}


def form_factor(gpu_name: str) -> str:
    """SXM, PCIe, NVL or OAM for a known GPU name, else empty."""
    return FORM_FACTORS.get(gpu_name.strip().casefold(), "")


_PRECISION_FIELD = {
    "32": "fp32",
    "tf32": "tf32",
    "16-mixed": "fp16",
    "16-true": "fp16",
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
    "fp8": "fp8",  # its Linear layers' share; the rest in bf16 (results.efficiency)
}


def precision_field(precision: str) -> str:
    """The matmul dtype a precision's FLOPs run in: fp32, tf32, fp16, bf16 or fp8."""
    return _PRECISION_FIELD[precision]


def peak_tflops(gpu_name: str, precision: str) -> tuple[float, str] | None:
    """(peak TFLOP/s, source) for an exactly known GPU name, else None."""
    spec = PEAKS.get(gpu_name.strip().casefold())
    if spec is None or not getattr(spec, precision_field(precision)):
        return None
    return getattr(spec, precision_field(precision)), spec.source


def dtype_peak_tflops(gpu_name: str, dtype: str) -> float | None:
    """The datasheet's TFLOP/s of one matmul dtype (fp32, tf32, fp16, bf16, fp8; what
    `dlbench peak` names its figures by) for an exactly known GPU name, else None (a GPU
    without that dtype's tensor cores too)."""
    spec = PEAKS.get(gpu_name.strip().casefold())
    if spec is None or dtype not in set(_PRECISION_FIELD.values()):
        return None
    return getattr(spec, dtype) or None


def peak_bandwidth_tb_s(gpu_name: str) -> float | None:
    """Peak memory bandwidth (TB/s) for an exactly known GPU name, else None."""
    return PEAK_BANDWIDTH_TB_S.get(gpu_name.strip().casefold())
