# Pre-build hook of a wheel workflow (PowerShell): find the CI row (CU_VERSION, else DESIRED_CUDA;
# Python; platform), check its nvcc, and append its environment to $env:BUILD_ENV_FILE and
# $env:GITHUB_ENV. Exits 3 (and writes nothing) when the row cannot be built honestly.
#   pwsh scripts/pre_build_hook.ps1 --config path/to/buildrows.toml
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest
$python = if ($env:BUILDROWS_PYTHON_EXE) { $env:BUILDROWS_PYTHON_EXE } else { 'python' }
# The wheel builder starts without buildrows: install it once from BUILDROWS_SPEC (default: this checkout).
& $python -c 'import buildrows' 2>$null
if ($LASTEXITCODE -ne 0) {
  $spec = if ($env:BUILDROWS_SPEC) { $env:BUILDROWS_SPEC } else { Split-Path -Parent $PSScriptRoot }
  Write-Host "+ $python -m pip install -q $spec"
  & $python -m pip install -q $spec
  if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
}
& $python -m buildrows hook @args
exit $LASTEXITCODE
