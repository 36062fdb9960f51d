"""`buildrows matrix`: the release gate between the shared generator and the build job (SPEC §7)."""

from __future__ import annotations

import argparse
import os
import sys

from buildrows.commands.policy_arg import policy
from buildrows.errors import BadInput
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", required=True, metavar="PLATFORM",
                   help="the policy platform this matrix was generated for: linux-x86_64, linux-aarch64, windows-amd64")
    p.add_argument("--from", dest="source", required=True, metavar="FILE",
                   help="the generator's output ({\"include\": [rows]}); '-' reads standard input")
    p.add_argument("--pull-request", action="store_true",
                   help="build one representative row: the first train of [cuda] pull-request on offer, else the newest")
    p.add_argument("--jetpack", action="store_true",
                   help="ask for the platform's JetPack rows (refused with their declared reason while empty)")
    p.add_argument("--github-output", action="store_true",
                   help="also append matrix=<json> to $GITHUB_OUTPUT")


def _read(source: str) -> tuple[str, str]:
    if source == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(source, encoding="utf-8") as f:
            return f.read(), source
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--from {source}: cannot read the matrix: {e}\n"
                       "    fix: pass the generator's output file, or '-' for standard input") from None


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.ci import matrix

    out_path = os.environ.get("GITHUB_OUTPUT") if args.github_output else None
    if args.github_output and not out_path:
        raise BadInput("--github-output: $GITHUB_OUTPUT is not set\n"
                       "    fix: run inside a GitHub Actions step, or drop --github-output")
    pol = policy(args)
    matrix.check_platform(pol, args.platform)
    text, where = _read(args.source)
    if args.jetpack:
        # Validate the input first: a malformed matrix is reported as such, even here.
        matrix.validate_rows(matrix.parse_generator_output(text, where), where)
        raise matrix.jetpack_refusal(pol, args.platform)
    result = matrix.narrow(pol, args.platform, text, source=where, pull_request=args.pull_request)
    blob = result.as_json()
    with ui.group(f"buildrows matrix: {args.platform}, {len(result.include)} of {result.offered} rows"):
        for line in matrix.summarize_dropped(result.dropped):
            ui.info(line)
        for row in result.rows:
            ui.info(f"build {row.name}" + (f"  (image {row.image})" if row.image else ""))
    if out_path:
        from buildrows.render.envfile import append_file

        # One locked write on a fresh line; the JSON is one line, so no delimiter is needed.
        append_file(out_path, f"matrix={blob}\n")
    ui.print(blob)
    return 0
