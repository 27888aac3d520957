"""Stream state in one place: the ledger (which stream owns each event id and message, resume
chains, what recovery is safe) and the resumption guard that feeds it live."""
