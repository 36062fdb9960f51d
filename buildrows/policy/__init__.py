"""The policy: buildrows.toml loaded, validated and normalised into frozen rows.

- `load`: read the file (or `[tool.buildrows]`), collect every error, build the model;
- `schema`: the file's keys as data (validation, "did you mean", the JSON Schema, the reference);
- `model`: the frozen, trusted result every later stage reads;
- `archs`: GPU architecture lists and CUDA trains (parsed strictly, rendered three ways);
- `rows`: selecting rows by name or glob; `requirements`: the runtime a row's wheel declares;
- `pinning`: how CI installs buildrows; `edit` and `starter`: writing a policy (archs, init).
"""
