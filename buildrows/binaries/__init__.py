"""Readers of binaries: what `check` and `archs --from-wheel` read a wheel with.

- `wheelread`: a wheel's name, metadata and shared libraries (zip members, checked and bounded), from its parts:
  `zipdir` (the central directory), `distinfo` (name, METADATA), `libraries`, `kernelread` (kernel files);
- `libstream`: one compressed member read as a stream, only as far as its headers and device code;
- `inflate`: the deflate backend (zlib-ng where it has wheels, else the standard library);
- `binfmt`: ELF, PE/COFF and Mach-O headers, their links, search paths and device-code sections;
- `fatbin`, `fatscan`: CUDA fat binaries and the entries (cubin, PTX) inside them;
- `looseread`: a library or directory given instead of a wheel.
"""
