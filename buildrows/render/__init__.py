"""Rendering a row plan into the files a build reads: CMake presets (`presets`) and environment
files with exact quoting (`envfile`). The scikit-build-core metadata provider a project names in
its pyproject.toml keeps its public path, `buildrows.metadata`."""
