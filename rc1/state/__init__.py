"""The gated state machine as data (`table`) and its records on disk (`store`: the machine record, the
audit log, the signed pass tickets). Below every package that reads or writes them: gates verify tickets,
eval records accepted early stops, and rc1.machine drives the transitions."""
