package postgres

// SQLDueHeads exposes the DueHeads query to the benchmarks, which print its plan.
const SQLDueHeads = sqlDueHeads

// SQLClaim exposes the Claim statement to the benchmarks.
const SQLClaim = sqlClaim

// SQLRecompute exposes the statement that recomputes a user's free_at after an entry write.
const SQLRecompute = sqlRecompute
