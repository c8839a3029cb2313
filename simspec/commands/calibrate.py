"""`simspec calibrate`: measure a calibration profile with torch, or write an analytic one.

``--device cuda|cpu`` runs the torch microbenchmarks of :mod:`simspec.calibrate` (torch is
imported only then) and writes the measured profile; ``--analytic GPU`` writes the spec-sheet +
assumed-efficiency profile of a catalog GPU (no torch; with ``--model``, synthetic tables too).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simspec.commands import catalog_entry, check_outputs, check_writable, table, write_output
from simspec.params import MOE_KERNEL_FORMS, RooflineParams

NAME = "calibrate"
HELP = "Measure a calibration profile on a GPU (torch), or write an analytic one."
EXAMPLE = (
    "simspec calibrate --device cuda --model qwen3-30b-a3b "
    "--out calibration/h100-sxm-qwen3-30b-a3b.json"
)
DEFAULT_MODEL = "qwen3-30b-a3b"
DEFAULT_MOE_KERNEL = RooflineParams().moe_kernel

#: Device names (torch.cuda.get_device_name) -> catalog GPUs whose spec sheet is the peak.
#: First match wins: "H20" is a substring of "H200" and "B200" of "GB200", so the longer names
#: come first or are excluded.
_DETECT = (
    (("H200",), (), "h200"),
    (("H20",), ("H200",), "h20"),
    (("H800",), ("PCIE",), "h800"),
    (("H100",), ("PCIE", "NVL"), "h100-sxm"),
    (("H100", "PCIE"), (), "h100-pcie"),
    (("A800", "80GB"), ("PCIE",), "a800-sxm-80gb"),
    (("A100", "80GB"), ("PCIE",), "a100-sxm-80gb"),
    (("A100", "PCIE", "40GB"), (), "a100-pcie-40gb"),
    (("GB200",), (), "gb200"),
    (("B200",), ("GB200",), "b200"),
    (("B300",), (), "b300"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec calibrate`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        help="run the torch microbenchmarks here (cpu: tiny shapes, to test the pipeline)",
    )
    source.add_argument(
        "--analytic",
        metavar="GPU",
        help="write the analytic profile of catalog GPU (spec sheet + assumed efficiencies)",
    )
    source.add_argument(
        "--refit",
        metavar="PROFILE.json",
        help="fit a measured profile's tables again with this version's fit (no torch, no GPU):"
        " the measurement is kept, the fitted values follow the code",
    )
    parser.add_argument("--out", required=True, metavar="PROFILE.json", help="profile to write")
    parser.add_argument(
        "--model",
        default=None,
        help=f"catalog model whose shapes are benchmarked (default with --device: {DEFAULT_MODEL};"
        " with --analytic: none, or synthetic roofline tables for this model)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller grids (a GPU run in under a minute)"
    )
    parser.add_argument(
        "--gpu",
        default=None,
        help="catalog GPU the device is (default: detected from the device name; "
        "none: efficiencies are fractions of the measured ceilings)",
    )
    parser.add_argument(
        "--shapes",
        choices=("full", "tiny"),
        default=None,
        help="model shapes to benchmark (default: full on cuda, tiny on cpu)",
    )
    parser.add_argument(
        "--raw", metavar="DIR", help="also write every repetition as CSV files into DIR"
    )
    parser.add_argument(
        "--moe-kernel",
        choices=MOE_KERNEL_FORMS,
        default=None,
        help=f"MoE kernel form the profile is fitted for (default: {DEFAULT_MOE_KERNEL}; the "
        "other form's constants are fitted too); with --analytic, the form of its tables",
    )


def _git_sha() -> str:
    """The source commit: ``$SIMSPEC_GIT_SHA`` when set (a copied tree), else git's HEAD."""
    if os.environ.get("SIMSPEC_GIT_SHA"):
        return os.environ["SIMSPEC_GIT_SHA"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _command(args: argparse.Namespace) -> str:
    parts = ["simspec", "calibrate"]
    if args.device:
        parts += ["--device", args.device]
    elif args.refit:
        parts += ["--refit", args.refit]
    else:
        parts += ["--analytic", args.analytic]
    for flag in ("model", "gpu", "shapes", "moe_kernel"):
        value = getattr(args, flag)
        if value:
            parts += [f"--{flag.replace('_', '-')}", value]
    if args.quick:
        parts.append("--quick")
    parts += ["--out", args.out]
    return " ".join(parts)


def detect_gpu(device_name: str) -> str:
    """The catalog GPU a CUDA device name stands for, or "" (see ``--gpu``).

    >>> detect_gpu("NVIDIA H100 80GB HBM3"), detect_gpu("NVIDIA H100 NVL"), detect_gpu("L4")
    ('h100-sxm', '', '')
    >>> detect_gpu("NVIDIA H20"), detect_gpu("NVIDIA H200"), detect_gpu("NVIDIA GB200")
    ('h20', 'h200', 'gb200')
    >>> detect_gpu("NVIDIA A800-SXM4-80GB"), detect_gpu("NVIDIA H100 PCIe")
    ('a800-sxm-80gb', 'h100-pcie')
    """
    upper = device_name.upper()
    for needed, excluded, name in _DETECT:
        if all(n in upper for n in needed) and not any(x in upper for x in excluded):
            return name
    return ""


def _torch(device: str) -> Any:
    """torch, or an input error saying how to get it (or why the device is unusable)."""
    from simspec.errors import InputError

    try:
        import torch
    except ImportError:
        raise InputError(
            "--device",
            device,
            "torch installed (pip install 'simspec[calibrate]')",
            "no module named torch",
        ) from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(
            "--device",
            "cuda",
            "a CUDA GPU visible to torch",
            f"torch {torch.__version__} with torch.cuda.is_available() = False "
            "(use --device cpu to test the pipeline)",
        )
    return torch


def _refit(path: str, meta: dict[str, str], params: RooflineParams) -> dict[str, Any]:
    """The measured profile at ``path`` fitted again (its tables, metadata and peaks kept).

    Only the measurement is read: the fitted section may be another version's (renamed or
    removed keys), which is the point of refitting.
    """
    import json

    from simspec.calibrate.plan import bench_model
    from simspec.errors import InputError
    from simspec.fit import assemble_profile
    from simspec.profile import profile_from_dict
    from simspec.schema import to_dict

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError("--refit", path, "a readable profile JSON", str(err)) from None
    meta_in = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta_in, dict) or meta_in.get("kind") != "measured":
        kind = meta_in.get("kind") if isinstance(meta_in, dict) else None
        raise InputError("--refit", path, "a measured profile (metadata.kind)", repr(kind))
    # The measurement is checked as any profile's is (exit 2 naming the key path); only the
    # fitted values, which this refit replaces, may be another version's.
    profile_from_dict({**data, "fitted": to_dict(params)}, path)
    model = catalog_entry("model", str(meta_in.get("model")), f"{path}: metadata.model")
    return assemble_profile(
        bench_model(model, str(meta_in.get("shapes"))),
        data["tables"],
        metadata={**meta_in, "refit": meta},
        peak=data["peak"],
        ceilings=data.get("ceilings") or {},
        assumed=params,
    )


def _eagle_head(model: str) -> Any:
    """The catalog's EAGLE-3 head for ``model`` (its draft step is timed), or None."""
    from simspec import catalog

    name = f"eagle3-{model}"
    return catalog.get_drafter(name) if name in catalog.drafter_names() else None


def _write_raw(folder: str, raw: dict[str, list[dict[str, Any]]]) -> None:
    from simspec.sweep.tables import to_csv

    for name, rows in raw.items():
        if rows:
            write_output(str(Path(folder) / f"{name}.csv"), to_csv(rows), "--raw")


def execute(args: argparse.Namespace) -> int:
    """Measure (or write) the profile, print its fitted parameters, write it atomically."""
    from simspec.calibrate import analytic_profile, measure_profile
    from simspec.profile import profile_json

    check_writable(args.out, "--out")
    refit_input = [("measured profile (--refit)", Path(args.refit))] if args.refit else []
    check_outputs([("--out", args.out)], refit_input)
    date = datetime.now(UTC).isoformat(timespec="seconds")
    meta = {"date": date, "command": _command(args), "git_sha": _git_sha()}
    started = time.perf_counter()
    params = RooflineParams(moe_kernel=args.moe_kernel or DEFAULT_MOE_KERNEL)
    if args.refit:
        data = _refit(args.refit, meta, params)
        raw: dict[str, list[dict[str, Any]]] = {}
    elif args.analytic:
        gpu = catalog_entry("gpu", args.analytic, "--analytic")
        model = catalog_entry("model", args.model, "--model") if args.model else None
        data = analytic_profile(
            gpu,
            model=model,
            params=params,
            quick=args.quick,
            date=meta["date"],
            command=meta["command"],
            git_sha=meta["git_sha"],
        )
        raw = {}
    else:
        model = catalog_entry("model", args.model or DEFAULT_MODEL, "--model")
        torch = _torch(args.device)
        gpu = None
        if args.gpu:
            gpu = catalog_entry("gpu", args.gpu, "--gpu")
        elif args.device == "cuda":
            detected = detect_gpu(torch.cuda.get_device_name())
            gpu = catalog_entry("gpu", detected, "--gpu") if detected else None
        shapes = args.shapes or ("full" if args.device == "cuda" else "tiny")
        data, raw = measure_profile(
            device=args.device,
            model=model,
            quick=args.quick,
            shapes=shapes,
            gpu=gpu,
            metadata=meta,
            assumed=params,
            drafter=_eagle_head(model.name),
            progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        )
    write_output(args.out, profile_json(data), "--out")
    if args.raw:
        _write_raw(args.raw, raw)
    elapsed = time.perf_counter() - started
    m = data["metadata"]
    print(
        f"{m['kind']} profile of {m['device']} ({m['gpu'] or 'not in the catalog'}), "
        f"model {m['model'] or '-'} ({m['shapes'] or 'no tables'}), {elapsed:.1f} s"
    )
    fitted = data["fitted"]
    rows = [
        (k, f"{v:.6g}" if isinstance(v, float) else str(v), data["provenance"].get(k, ""))
        for k, v in fitted.items()
    ]
    print(table(("parameter", "value", "provenance"), rows))
    if data["validation"]:
        print()
        vrows = [
            (
                f"B={v['batch']} x {v['tokens_per_request']} tok",
                v["mode"],
                v["use"],
                f"{v['measured_s'] * 1e3:.3f}",
                f"{v['predicted_s'] * 1e3:.3f}",
                f"{v['relative_error'] * 100:+.1f}%",
            )
            for v in data["validation"]
        ]
        headers = ("stack point", "mode", "use", "measured ms", "predicted ms", "error")
        print(table(headers, vrows))
    print(f"wrote {args.out}")
    return 0
