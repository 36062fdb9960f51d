"""`buildrows toolkit install|list|path TRAIN`: a train's CUDA toolkit in the cache, without root."""

from __future__ import annotations

import argparse
import os

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    inst = sub.add_parser("install", help="assemble a train's toolkit into the cache (no-op when it is there)",
                          parents=[_common(p)])
    inst.add_argument("train", metavar="TRAIN", help="the CUDA train: 13.2, cu132")
    inst.add_argument("--source", choices=("pypi", "redist"),
                      help="NVIDIA's pinned PyPI wheels (13.x) or its redistributable archives (any train); "
                           "default: PyPI where the train is pinned, else the archives")
    inst.add_argument("--mirror", metavar="URL",
                      help="where the redistrib_X.Y.Z.json manifests and archives are "
                           "(default: $BUILDROWS_CUDA_MIRROR, else NVIDIA's server)")
    inst.add_argument("--release", metavar="X.Y.Z", help="this release of the train instead of its newest")
    inst.add_argument("--libraries", action="store_true",
                      help="also the cuBLAS, cuSPARSE, cuSOLVER, cuRAND and cuFFT headers and libraries "
                           "a PyTorch extension includes (about 700 MB more to download)")
    inst.add_argument("--force", action="store_true", help="assemble it again even when it is in the cache")
    path = sub.add_parser("path", help="print the root of a train's toolkit in the cache (exit 3 when absent)",
                          parents=[_common(p)])
    path.add_argument("train", metavar="TRAIN", help="the CUDA train: 13.2, cu132")
    sub.add_parser("list", help="list the toolkits in the cache", parents=[_common(p)])


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--platform", metavar="NAME", help="the platform (default: this machine's)")
    return common


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.errors import Refused
    from buildrows.plan.host import host_platform
    from buildrows.policy.trains import Train
    from buildrows.provision import toolkit

    env = dict(os.environ)
    platform = args.platform or host_platform(env)
    if args.action == "list":
        found = toolkit.list_installed(env)
        for tk in found:
            ui.print(f"{tk.platform}  {tk.train.dotted}  {tk.root}  ({tk.source} {tk.release}, nvcc {tk.nvcc_version}"
                     f"{', libraries' if tk.libraries else ''})")
        if not found:
            from buildrows.plan.provisioned import toolkits_dir

            ui.info(f"no toolkits in {toolkits_dir(env)}")
        return 0
    try:
        train = Train.parse(args.train)
    except ValueError as e:
        from buildrows.errors import BadInput

        raise BadInput(f"toolkit {args.action}: {e}\n    fix: name the train as 13.2 or cu132") from e
    if args.action == "path":
        have = toolkit.installed(train, platform, env)
        if have is None:
            raise Refused(f"CUDA {train.dotted} for {platform} is not in the cache ({toolkit.toolkit_root(train, platform, env)})\n"
                          f"    fix: `buildrows toolkit install {train.dotted}`")
        ui.print(str(have.root))
        return 0
    here = host_platform(env)
    if platform != here:
        # The assembled nvcc is run to check its train, so it must be this machine's.
        raise Refused(f"toolkit install: CUDA {train.dotted} for {platform} cannot be assembled on this "
                      f"{here} machine (its nvcc is run to check the train)\n"
                      f"    fix: run `buildrows toolkit install {train.dotted}` on a {platform} machine")
    tk = toolkit.install(train, platform, env, source=args.source, libraries=args.libraries, mirror=args.mirror,
                         release=args.release, force=args.force, progress=ui.info)
    ui.ok(f"CUDA {train.dotted}: {tk.describe()}")
    ui.print(str(tk.root))
    return 0
