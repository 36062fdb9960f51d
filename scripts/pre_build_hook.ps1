# Pre-build hook of a wheel workflow (PowerShell): find the CI row (CU_VERSION, else DESIRED_CUDA;
# Python; platform), check its nvcc, and append its environment to $env:BUILD_ENV_FILE and
# $env:GITHUB_ENV. Exits 3 (and writes nothing) when the row cannot be built honestly.
#   pwsh scripts/pre_build_hook.ps1 --config path/to/buildrows.toml
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest
$python = if ($env:BUILDROWS_PYTHON_EXE) { $env:BUILDROWS_PYTHON_EXE } else { 'python' }
& $python -m buildrows hook @args
exit $LASTEXITCODE
