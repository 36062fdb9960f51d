"""One module per CLI command: `add_arguments(parser)` and `run(args, ui) -> int`.

Keep imports at the top of these modules light (standard library and buildrows' own light
modules); import heavy libraries inside `run`.
"""
