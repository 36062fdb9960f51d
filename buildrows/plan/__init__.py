"""Where a row becomes a plan on this host: `host` (this machine and the row CI asks for),
`toolchain` (the CUDA compiler and its train, the CMake generator), `row` (the single place a
policy row turns into a `RowPlan`), and `torchenv` (what a torch build gets from its torch).
Presets, environment files, drivers and doctor all read the plan."""
