package postgres

// SQLDueHeads exposes the DueHeads query to the benchmarks, which print its plan.
const SQLDueHeads = sqlDueHeads
