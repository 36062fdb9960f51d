"""Building rows on this machine, the way CI does.

- `orchestrate`: `build` end to end for many rows (leaders and followers, staging, the report);
  its stages: `rows_plan` (which rows lead and follow), `row_steps` (one row's build),
  `wheel_finish` (stamp and check), `placement` (staging, the wheel directory), `report`;
- `prepare`: choosing the rows, provisioning what they lack, running doctor on them;
- `doctor`: what a row needs here, as findings with fixes;
- `drivers`: the commands each driver runs (computed), `runner`: the one module that runs them;
- `compiler_cache` and `configure_seed`: compile a train's kernels and detect compilers once;
- `stamp` and `record`: what the built wheel gets (local version, runtime, the build record);
- `summary`: the per-row outcome table and the exit code.
"""
