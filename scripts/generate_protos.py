"""Regenerate the Python stubs from proto/ (the one source of the wire contract).

python scripts/generate_protos.py            # rewrite the committed stubs in place
python scripts/generate_protos.py --check    # exit 1 if the committed stubs are stale
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def _googleapis_protos() -> Path:
    """Where googleapis-common-protos (brought by grpcio-status) keeps google/rpc/*.proto."""
    from google.rpc import status_pb2

    return Path(status_pb2.__file__).resolve().parent.parent.parent


def generate(out_dir: Path) -> list[Path]:
    """Compile every .proto under proto/ into out_dir; return the generated files relative to it."""
    sources = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{protoc._get_resource_file_name('grpc_tools', '_proto')}"]
    args.append(f"-I{_googleapis_protos()}")
    args += [f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *sources]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out_dir) for p in out_dir.rglob("*") if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed stubs are stale")
    check = parser.parse_args().check
    if not check:
        generate(PROTO_ROOT)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        committed = sorted(
            p.relative_to(PROTO_ROOT) for p in PROTO_ROOT.rglob("*") if p.name.endswith(GENERATED_SUFFIXES)
        )
        stale = [str(p) for p in fresh if not filecmp.cmp(Path(tmp) / p, PROTO_ROOT / p, shallow=False)]
        stale += [str(p) for p in set(committed) ^ set(fresh)]
    if stale:
        print("generated code is stale; run `python scripts/generate_protos.py`:", *stale, sep="\n  ")
        return 1
    print(f"generated code is current ({len(fresh)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
