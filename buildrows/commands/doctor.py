"""`buildrows doctor ROW...`: check this machine has everything the rows need, before a long build."""

from __future__ import annotations

import argparse

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("selectors", nargs="*", metavar="ROW",
                   help="row names or globs (default: this machine's row: its platform, this Python, "
                        "and the CUDA train of the nvcc found, else CPU)")
    p.add_argument("--project", metavar="DIR", help="the project to build (default: the policy's source-dir)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="check for this build driver instead of the policy's")
    p.add_argument("--isolation", action="store_true",
                   help="the wheel build will fetch its build requirements from the registry (PEP 517 isolation)")
    p.add_argument("--container", action="store_true",
                   help="check what `build --container` needs instead: podman or docker, the row's builder image on "
                        "this machine, its Python and nvcc, and whether a container here reaches a GPU")
    p.add_argument("--image", metavar="IMAGE", help="with --container: check this image instead of the row's")
    p.add_argument("--provision", action="store_true",
                   help="with --container: the hook will assemble a train the image lacks (as `build --provision`)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout (per row: its findings, each with status, what was seen "
                        "and the fix; the row's verdict); the report goes to stderr")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.build.prepare import BuildOptions, doctor

    if getattr(args, "container", False):
        from buildrows.ci.container_run import doctor_container

        return doctor_container(BuildOptions.of(args), args.image, ui)
    if getattr(args, "image", None) is not None or getattr(args, "provision", False):
        from buildrows.errors import BadInput

        raise BadInput("--image and --provision apply to `doctor --container`\n    fix: add --container, or drop them")
    if getattr(args, "json", False):
        return _json(BuildOptions.of(args), ui)
    doctor(BuildOptions.of(args), ui)
    return 0


def _json(opts: object, ui: UI) -> int:
    """`doctor --json`: every selected row's findings as one document; exit 3 when a row lacks something."""
    import json

    from buildrows.build.findings import Finding
    from buildrows.build.prepare import BuildOptions, doctor_row, resolve_rows, setup
    from buildrows.errors import EXIT_OK, BuildrowsError

    assert isinstance(opts, BuildOptions)
    pol, env, host = setup(opts, ui)
    rows = resolve_rows(pol, opts.selectors, env, host, ui)
    doc_rows: list[dict[str, object]] = []
    code = EXIT_OK
    for row in rows:
        found: list[Finding] = []
        error: str | None = None
        try:
            doctor_row(pol, row, env, host, opts, ui, collect=found)
        except BuildrowsError as e:
            ui.error(e.title, str(e))
            error, code = str(e), max(code, e.exit_code)
        doc_rows.append({
            "row": row.name,
            "ready": error is None,
            "findings": [{"check": f.check, "status": f.status, "seen": f.seen, "fix": f.fix or None} for f in found],
            "error": error,
        })
    ui.out.write(json.dumps({"command": "doctor", "exit_code": code, "rows": doc_rows}, indent=2) + "\n")
    ui.out.flush()
    return code
