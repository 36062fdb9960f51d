"""The wheel check (SPEC §8): `expect` turns a row (or a wheel's tags and the command line) into
what the wheel must hold, `judges` holds what the readers in `buildrows.binaries` saw to it,
`promises` checks a project's own promises, `torchpin` the torch requirement of an extension."""
