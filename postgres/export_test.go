package postgres

// SQLDueHeads exposes the DueHeads query to the benchmarks, which print its plan.
const SQLDueHeads = sqlDueHeads

// SQLClaim exposes the Claim statement to the benchmarks.
const SQLClaim = sqlClaim
