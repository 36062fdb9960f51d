from buildrows.cli import entry

entry()
