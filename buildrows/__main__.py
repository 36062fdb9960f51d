"""`python -m buildrows`: how the rendered CI scripts run buildrows (the hook on every CI job)."""

import gc

# No cyclic collection while modules load and the policy is read: a short command (env, hook)
# would spend a tenth of its start-up in it; main() turns it back on for every other command.
gc.disable()

from buildrows.cli import entry  # noqa: E402

entry()
