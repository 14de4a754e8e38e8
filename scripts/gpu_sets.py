#!/usr/bin/env python3
"""Build the engine wheel sets a GPU machine without internet needs, as chunks of at most 55 MB.

    python3 scripts/gpu_sets.py vllm-0.26.0 [--out .gpu] [--work /tmp/gpu-sets]
    python3 scripts/gpu_sets.py sglang-0.5.15
    python3 scripts/gpu_sets.py --list

Run it on a machine with the package index (pip reaches PyPI). For each set it downloads the
engine and the packages it imports that the GPU image lacks (Python 3.12, manylinux x86-64
wheels; the image already has torch 2.11, CUDA's libraries, numpy, ...), unpacks them into one
site directory, keeps only what an H100 (sm_90) runs in every shared library's CUDA fat
binaries (surfer/bench/gpu/fatbin.py: other architectures' cubins and the template instances
named in the set's `drop_units` are zeroed in place), packs the directory as a sparse tar
compressed with xz (gzip with --fast) and splits it into `<set>.tar.xz.partN` chunks beside a manifest
(`<set>.manifest.json`: every wheel and version, what was left out and why, what was stripped,
and the command that checks the imports on the device). scripts/gpu_device.sh unpack takes the
chunks from /tmp on the device.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from surfer.bench.gpu.fatbin import StripReport, strip_file  # noqa: E402

CHUNK = "55M"
PLATFORM = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"] + [
    arg for tag in ("2_39", "2_38", "2_35", "2_34", "2_31", "2_28", "2_27", "2_24", "2_17")
    for arg in ("--platform", f"manylinux_{tag}_x86_64")
] + ["--platform", "manylinux2014_x86_64"]

# What the GPU image already has (the device's KINDS.md lists them): never carried.
IMAGE = {
    "absl-py", "accelerate", "aiofiles", "aiohappyeyeballs", "aiohttp", "aiosignal", "annotated-doc", "anyio", "attrs",
    "certifi", "charset-normalizer", "click", "cloudpickle", "cmake", "cuda-bindings", "cuda-core", "cuda-pathfinder",
    "cuda-toolkit", "cupy-cuda13x", "einops", "filelock", "fsspec", "h11", "hf-xet", "httpcore", "httpx",
    "huggingface-hub", "idna", "jinja2", "joblib", "markdown-it-py", "markupsafe", "mdurl", "mpmath", "msgpack",
    "multidict", "networkx", "ninja", "numba", "numpy", "nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime", "nvidia-cudnn-cu13", "nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver",
    "nvidia-cusparse", "nvidia-cusparselt-cu13", "nvidia-ml-py", "nvidia-nccl-cu13", "nvidia-nvjitlink",
    "nvidia-nvshmem-cu13", "nvidia-nvtx", "opencv-python-headless", "packaging", "pandas", "pillow", "pip", "prometheus-client",
    "propcache", "protobuf", "psutil", "py-cpuinfo", "pyarrow", "pygments", "pyyaml", "regex", "requests", "rich",
    "safetensors", "scipy", "sentencepiece", "setuptools", "shellingham", "six", "sympy", "tiktoken", "timm",
    "tokenizers", "torch", "torchaudio", "torchvision", "tqdm", "transformers", "triton", "typer", "typing-extensions",
    "urllib3", "uvloop", "wheel", "yarl", "zipp", "llvmlite", "frozenlist", "python-dateutil", "pytz", "tzdata",
}

# FlashAttention-3 instances the served models never run: head dimensions other than 96 (the vision
# towers' 72 and 80 round up to it) and 128 (both language models), float16 and fp8, soft-capping.
FA3_DROP = r"hdim(64|192|256)(_\d+)?_|_(fp16|e4m3|fp8)_|softcap"

SETS: dict[str, dict] = {
    "vllm-0.26.0": {
        "site": "site",
        "engine": ["vllm==0.26.0"],
        # left out of the resolution: the image has them, or they are optional kernels these models never load
        "leave_out": {
            "torch", "torchaudio", "torchvision", "torchcodec", "pynvvideocodec", "flashinfer-python", "flashinfer-cubin",
            "apache-tvm-ffi", "tilelang", "nvidia-cutlass-dsl", "tokenspeed-mla", "humming-kernels", "quack-kernels",
            "fastsafetensors", "compressed-tensors", "xgrammar", "transformers", "tokenizers", "numpy", "pillow",
            "safetensors", "nvidia-cudnn-frontend", "numba", "opencv-python-headless",
        },
        # imported at start but pinned to packages left out above: taken without their requirements
        "no_deps": [
            "setuptools<81", "six", "compressed-tensors==0.17.0", "xgrammar<1", "torchcodec>=0.14", "quack-kernels",
            "humming-kernels==0.1.10", "fastsafetensors", "loguru", "pyelftools", "apache-tvm-ffi>=0.1.11,<0.2",
        ],
        "drop_units": FA3_DROP,
        "check": "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, "
                 "'transformers', transformers.__version__, torch.cuda.get_device_name())",
    },
    "sglang-0.5.15": {
        "site": "sgl-site",
        "engine": ["sglang==0.5.15", "sglang-kernel==0.4.4"],
        "leave_out": {
            "torch", "torchaudio", "torchvision", "torchcodec", "flashinfer-python", "flashinfer-cubin", "flash-attn-4",
            "apache-tvm-ffi", "tilelang", "nvidia-cutlass-dsl", "tokenspeed-mla", "quack-kernels", "sgl-deep-gemm",
            "nvidia-mathdx", "torchao", "xgrammar", "numpy", "pillow", "safetensors", "timm", "compressed-tensors",
            "datasets", "modelscope", "py-spy", "kernels", "smg-grpc-servicer", "blobfile",
            "cuda-python", "outlines", "torch-memory-saver", "llguidance", "anthropic", "openai-harmony",
            "sglang-kernel", "transformers", "tokenizers",
        },
        # SGLang pins its own transformers and tokenizers (kept in its own site, never on vLLM's path);
        # flashinfer compiles its kernels on the device (FLASHINFER_CUDA_ARCH_LIST=9.0a, nvcc there)
        "no_deps": [
            "transformers==5.12.1", "tokenizers==0.22.2", "flashinfer-python==0.6.12", "apache-tvm-ffi==0.1.11",
            "xgrammar==0.2.1", "torchao==0.17.0", "compressed-tensors", "llguidance>=0.7.11,<0.8", "openai-harmony==0.0.4",
            "torch-memory-saver", "outlines==0.1.11", "anthropic", "cuda-python>=13", "nvidia-ml-py",
        ],
        # imported at start (sglang.utils: IPython.display; the sampling module: dill; compressed-tensors, taken
        # without its requirements: loguru) though no requirement taken names them
        "with_deps": ["ipython", "dill", "loguru"],
        "drop_units": FA3_DROP + r"|_sm80|_sm100",
        "check": "import sglang, sglang.launch_server, dill, loguru, soundfile, compressed_tensors, torch, transformers; print('sglang', sglang.__version__, 'torch', torch.__version__, "
                 "'transformers', transformers.__version__, torch.cuda.get_device_name())",
    },
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def run(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{done.stderr[-3000:]}")
    return done.stdout


def requirements(wheel: Path) -> list[str]:
    """The wheel's requirements without extras, for Python 3.12 on Linux x86-64."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(meta).decode().splitlines()
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix", "extra": ""}
    out = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(str(req))
    return out


def build(name: str, out: Path, work: Path, fast: bool = False, reuse: bool = False) -> dict:
    spec = SETS[name]
    wheels, site = work / name / "wheels", work / name / spec["site"]
    facts_file = work / name / "stripped.json"
    if reuse and site.is_dir():  # what the first strip found (a second one finds dropped units' names zeroed)
        facts = json.loads(facts_file.read_text()) if facts_file.exists() else strip_site(site, spec, list(spec["no_deps"]))
        return pack(name, spec, out, work, fast, facts)
    shutil.rmtree(work / name, ignore_errors=True)
    wheels.mkdir(parents=True)
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM, "-d", str(wheels), *spec["engine"])
    leave_out = {canonical(n) for n in spec["leave_out"]}
    engines = {canonical(re.split(r"[=<>!~]", e)[0]) for e in spec["engine"]}
    light = sorted({r for w in wheels.glob("*.whl") for r in requirements(w)
                    if canonical(re.split(r"[\s\[=<>!~;(]", r)[0]) not in leave_out | engines} | set(spec.get("with_deps", [])))
    report_path = work / name / "resolved.json"
    run(sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--report", str(report_path),
        *PLATFORM, "--target", str(work / name / "resolve-target"), *light)
    resolved = json.loads(report_path.read_text())["install"]
    picked = sorted(f"{item['metadata']['name']}=={item['metadata']['version']}" for item in resolved
                    if canonical(item["metadata"]["name"]) not in IMAGE | leave_out | engines)
    no_deps = list(spec["no_deps"])
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM, "-d", str(wheels), *picked, *no_deps)
    site.mkdir()
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    facts = strip_site(site, spec, no_deps)
    facts_file.write_text(json.dumps(facts))
    return pack(name, spec, out, work, fast, facts)


def strip_site(site: Path, spec: dict, no_deps: list[str]) -> dict:
    """Zero what an sm_90 GPU never runs in every shared library of `site`, in place (doing it again changes
    nothing, but no longer sees the names of the units it dropped)."""
    drop = re.compile(spec["drop_units"]) if spec.get("drop_units") else None
    stripped = StripReport()
    libraries = {}
    for lib in sorted(site.rglob("*.so*")):
        if lib.is_file() and not lib.is_symlink():
            report = strip_file(lib, 90, drop)
            if report is not None and report.zeroed_bytes:
                stripped.add(report)
                libraries[str(lib.relative_to(site))] = {"zeroed_mb": round(report.zeroed_bytes / 2**20, 1),
                                                         "units_dropped": len(report.dropped_units)}
    return {"no_deps": no_deps, "zeroed_mb": round(stripped.zeroed_bytes / 2**20, 1), "libraries": libraries}


def pack(name: str, spec: dict, out: Path, work: Path, fast: bool, facts: dict) -> dict:
    """The site directory as a sparse tar, compressed (xz -6, or gzip -1 when `fast`), in chunks, and the manifest."""
    wheels, site = work / name / "wheels", work / name / spec["site"]
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob(f"{name}.tar.xz.part*"), *out.glob(f"{name}.tar.gz.part*")]:
        old.unlink()
    suffix, compress, unpack = ("gz", ["gzip", "-1"], "gzip -dc") if fast else ("xz", ["xz", "-T0", "-6"], "xz -d -T0")
    archive = work / name / f"{name}.tar.{suffix}"
    with open(archive, "wb") as sink:
        tar = subprocess.Popen(["tar", "cf", "-", "--sparse", "-C", str(site), "."], stdout=subprocess.PIPE)
        packed = subprocess.run(compress, stdin=tar.stdout, stdout=sink)
        if tar.wait() != 0 or packed.returncode != 0:
            sys.exit(f"tar | {compress[0]} failed")
    run("split", "-b", CHUNK, "-d", "-a", "1", str(archive), str(out / f"{name}.tar.{suffix}.part"))
    manifest = {
        "set": name, "site": f"/tmp/{spec['site']}",
        "wheels": sorted(w.name for w in wheels.glob("*.whl")),
        "left_out": sorted(spec["leave_out"]) + ["(the GPU image has: " + ", ".join(sorted(IMAGE)) + ")"],
        "taken_without_requirements": facts["no_deps"],
        "stripped": {"kept_architecture": "sm_90", "drop_units": spec.get("drop_units"),
                     "zeroed_mb": facts["zeroed_mb"], "libraries": facts["libraries"],
                     "why": "a GPU runs only cubins of its own architecture (or PTX up to it); the named template "
                            "instances are head dimensions, data types and features the served models never use"},
        "archive_mb": round(archive.stat().st_size / 2**20, 1),
        "chunks": sorted(p.name for p in out.glob(f"{name}.tar.{suffix}.part*")),
        "unpack": f"cat /tmp/{name}.tar.{suffix}.part* | {unpack} | tar x --sparse -C /tmp/{spec['site']}",
        "check": f"PYTHONPATH=/tmp/{spec['site']} python3 -c \"{spec['check']}\"",
    }
    (out / f"{name}.manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="*", help="sets to build: " + ", ".join(SETS))
    parser.add_argument("--out", type=Path, default=Path(".gpu"), help="where the chunks and manifests go (git-ignored)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-sets"), help="scratch directory")
    parser.add_argument("--list", action="store_true", help="list the sets")
    parser.add_argument("--fast", action="store_true",
                        help="gzip -1 instead of xz -6: ~15%% more chunks, ~10x faster to pack on a busy machine")
    parser.add_argument("--reuse", action="store_true", help="pack the site directory an earlier build left in --work again")
    args = parser.parse_args()
    if args.list or not args.sets:
        print("\n".join(f"{name}: {' '.join(spec['engine'])} -> /tmp/{spec['site']}" for name, spec in SETS.items()))
        return
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        sys.exit(f"unknown set(s): {', '.join(unknown)}; known: {', '.join(SETS)}")
    for name in args.sets:
        manifest = build(name, args.out, args.work, args.fast, args.reuse)
        print(f"{name}: {len(manifest['wheels'])} wheels, {manifest['stripped']['zeroed_mb']} MB zeroed, "
              f"{manifest['archive_mb']} MB packed in {len(manifest['chunks'])} chunk(s) in {args.out}")


if __name__ == "__main__":
    main()
