"""What `scripts/device_fast.sh` needs on a GPU machine that reaches no package registry, in the
64 MiB its call may carry.

    python scripts/device_pack.py pack --models M --wheels W --out .device   # here
    python scripts/device_pack.py unpack .device --out .models               # there (device_fast.sh does it)

`pack` writes into `--out`:

- `models.pt.xz`: the demo's path, inspect and detector checkpoints (M holds them: `playtester
  demo` writes them) in one xz file, the policies' weights in bfloat16 (their frozen encoder, the
  same tensors in both, stored once), the detector's in fp32: 29 MB where the three files take 90;
- the wheels in W (`pip download --only-binary=:all: --python-version 3.12 --platform
  manylinux_2_28_x86_64 --no-deps vizdoom==1.3.2 gymnasium==1.4.0 farama-notifications -d W`:
  what `run explore` imports that the machine lacks), ViZDoom's without Freedoom 1's IWAD (the park
  plays on Freedoom 2's textures; a 10 MB saving), its RECORD amended to match.

`unpack` writes the three checkpoints again, every weight in fp32: the same networks and shapes,
each policy weight rounded to bfloat16's 8 bits of mantissa (within 0.4 % of itself), which a
throughput figure does not see (the loop's cost hangs on the shapes, not on the weights' last bits).
"""

from __future__ import annotations

import argparse
import io
import lzma
import shutil
import sys
import zipfile
from pathlib import Path

MODELS = ("path", "inspect", "detector")
"""The checkpoints `bench_loop.py` runs with."""
HALVED = ("path", "inspect")
"""Those whose floating-point weights travel in bfloat16."""
DROPPED = ("vizdoom/freedoom1.wad",)
"""Files of the ViZDoom wheel that the park does not use."""
PACKED = "models.pt.xz"


def pack_models(models: Path, out: Path) -> int:
    """The three checkpoints of `models` in one xz file at `out`; its size in bytes."""
    import torch

    checkpoints = {}
    shared: dict[str, torch.Tensor] = {}  # a weight equal in both policies: one tensor, saved once
    for name in MODELS:
        ckpt = torch.load(models / f"{name}.ckpt", map_location="cpu", weights_only=False)
        state = {}
        for key, value in ckpt["state_dict"].items():
            if name in HALVED and value.is_floating_point():
                value = value.to(torch.bfloat16)
                if key in shared and torch.equal(shared[key], value):
                    value = shared[key]
                shared.setdefault(key, value)
            state[key] = value
        checkpoints[name] = {**ckpt, "state_dict": state}
    buffer = io.BytesIO()
    torch.save(checkpoints, buffer)
    out.write_bytes(lzma.compress(buffer.getvalue(), preset=6))
    return out.stat().st_size


def unpack_models(packed: Path, out: Path) -> list[Path]:
    """The checkpoints of `packed` (`pack_models`), every floating-point weight in fp32, in `out`."""
    import torch

    checkpoints = torch.load(io.BytesIO(lzma.decompress(packed.read_bytes())), map_location="cpu", weights_only=False)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, ckpt in checkpoints.items():
        state = {k: v.float() if v.is_floating_point() else v for k, v in ckpt["state_dict"].items()}
        path = out / f"{name}.ckpt"
        torch.save({**ckpt, "state_dict": state}, path)
        written.append(path)
    return written


def slim_wheel(wheel: Path, out: Path, dropped: tuple[str, ...] = DROPPED) -> Path:
    """`wheel` copied into the folder `out` without the files `dropped` (and their RECORD lines)."""
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename in dropped:
                continue
            data = src.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",", 1)[0] not in dropped).encode()
            dst.writestr(item, data)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("pack", help="the demo's models and the wheels, made small, into --out")
    p.add_argument("--models", type=Path, required=True, help="folder with path.ckpt, inspect.ckpt and detector.ckpt")
    p.add_argument("--wheels", type=Path, required=True, help="folder of the wheels the machine lacks")
    p.add_argument("--out", type=Path, default=Path(".device"))
    u = sub.add_parser("unpack", help="the checkpoints again, in fp32")
    u.add_argument("packed", type=Path, help="the folder `pack` wrote")
    u.add_argument("--out", type=Path, default=Path(".models"))
    args = parser.parse_args(argv)
    if args.verb == "unpack":
        for path in unpack_models(args.packed / PACKED, args.out):
            print(f"wrote {path}")
        return 0
    missing = [n for n in MODELS if not (args.models / f"{n}.ckpt").is_file()]
    wheels = sorted(args.wheels.glob("*.whl"))
    if missing or not wheels:
        print(f"error: {args.models} lacks {', '.join(f'{n}.ckpt' for n in missing)}" if missing else
              f"error: {args.wheels} holds no wheel", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    size = pack_models(args.models, args.out / PACKED)
    for wheel in wheels:
        if wheel.name.startswith("vizdoom-"):
            slim_wheel(wheel, args.out)
        else:
            shutil.copy2(wheel, args.out / wheel.name)
    total = sum(f.stat().st_size for f in args.out.iterdir() if f.is_file())
    print(f"wrote {args.out}: models {size / 1e6:.1f} MB, {len(wheels)} wheels, {total / 1e6:.1f} MB in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
