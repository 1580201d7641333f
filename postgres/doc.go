// Package postgres runs rota on PostgreSQL, for services whose dispatchers, workers and
// maintenance daemons live on several machines and share one database.
//
// It is a nested module (github.com/rotaworks/rota/postgres) so that the core stays free of
// dependencies: it imports the core and github.com/jackc/pgx/v5, never the reverse.
//
// # Where to start
//
// Open a pool with Open at start-up (every replica may; see below), then build the adapters
// over it:
//
//	pool, err := postgres.Open(ctx, "postgres://rota@db/app", "rota")
//	...
//	idx := postgres.NewIndex(pool)              // a duework.Index
//	watch := postgres.NewWatchlist(pool)        // a tenancy.Watchlist
//	plans := postgres.NewEntitlements(pool)     // a tenancy.Entitlements
//	d, err := dispatch.New(idx, dispatch.Config{...})
//
// Open parses the URL, points every connection at the schema (quoted, created if it does
// not exist), connects, pings and runs Migrate; its error names the step that failed. A
// host that builds its own pool calls Migrate itself.
//
// NewIndex implements duework.Index; NewLease and NewStateStore implement
// maintenance.Lease and maintenance.StateStore for a fleet of maintenance daemons:
//
//	sched, err := maintenance.NewScheduler(tasks, maintenance.Config{
//		Lease:      postgres.NewLease(pool, "heavy", maxHold), // same name and maxHold on every daemon
//		StateStore: postgres.NewStateStore(pool),
//		MaxHold:    maxHold,
//		...
//	})
//
// All five pass the core's conformance suites (duework/indextest,
// maintenance/maintenancetest, tenancy/tenancytest) against a real server.
//
// # What replicas share
//
// Everything a dispatcher or a worker decides on must be shared, or replicas disagree: a
// replica whose in-process watch list lacks a source another replica just added would
// unschedule it as removed. So replicas share the Index, the Watchlist and the
// Entitlements, all over one schema; only the cadence Registry and the lane wiring stay in
// process, and they must be configured alike on every replica.
//
// Watchlist keeps one row per entry in rota_watchlist, keyed by (user_id, slug); List reads
// a tenant's whole list in one query, ordered by slug, which is what a start-up sync of
// every tenant wants. Entitlements keeps one row per tenant given a plan in rota_plans;
// a tenant without one is on tenancy.PlanFree, as with tenancy.MemoryEntitlements, and
// SetPlan writes plans. Both are deny-by-default like the in-memory ones: every statement
// filters by the Context's user, and bad input (an AddedAt outside years 1 to 9999 UTC,
// which pgx would otherwise store wrapped) is refused before anything is sent.
//
// # Schema and migrations
//
// Every table lives in the pool's current schema — the first schema of its search_path — so
// one database can hold several independent rota installations (and each test its own):
// Open sets the search_path; a pool of one's own sets it in ConnConfig.RuntimeParams. The
// tables are prefixed rota_; the applied migration steps are recorded in
// rota_schema_migrations (not schema_migrations, which other migration tools use).
//
// Migrate is versioned and idempotent. It runs in one transaction under a transaction-level
// advisory lock keyed by the schema, so replicas that start together and all call it apply
// each step exactly once; the others wait and find nothing to do. It applies every step the
// schema has not recorded, so step numbers may leave gaps. A database holding a step this
// release does not know gives ErrSchemaTooNew and is left alone.
//
// # How dispatch stays cheap
//
// rota_due holds one row per entry (the duework.Entry columns plus the current claim's token
// and until). The due path is a pair of partial indexes over unclaimed rows only — (user_id,
// due_at, work_key) and (due_at, user_id, work_key), WHERE claim_until IS NULL — so a
// claimed row leaves the front of the due path at once instead of being re-read by every
// later cycle. A third partial index holds claimed rows by claim_until: a claim that ends
// without a Complete (a worker died) is found there, and the entry is due again at exactly
// claim_until without anyone touching it.
//
// rota_users holds one row per user: LastServed, and free_at, a lower bound of the earliest
// due_at among the user's unclaimed entries (NULL when it has none). DueHeads visits the users
// whose free_at has passed (a range of a small index) and reads each one's first perUser+1
// rows with a LATERAL join, plus the rows whose claims ended; so its cost grows with the
// number of users with due work, never with one user's backlog: with 10,000 users holding
// one due entry each, it costs the same whether one more user has 1,000 or 1,000,000
// due entries (see BENCHMARKS.md). DueHeads runs with JIT compilation off, which
// only slows a plan made of thousands of small index probes.
//
// # Plans that stale statistics cannot spoil
//
// A bulk load (a fresh deployment importing a backlog, a migration from another queue)
// leaves statistics that autovacuum will not refresh until a tenth of the rows change. If
// ANALYZE ran while one tenant's backlog was the whole of rota_due, the planner believes
// every row is that tenant's. A per-user read written the plain way — user_id = $1 ordered
// by due_at — can then be served by either partial index, and the planner picks
// rota_due_free and walks every due row of the backlog for each user: on a 200,000-row
// backlog DueHeads took 370 ms instead of 0.6 ms, and every Schedule, Complete and
// Unschedule 3.5 ms, until someone ran ANALYZE.
//
// So the per-user reads of DueHeads and of the free_at recomputation are written as keyset
// ranges, (user_id, due_at) BETWEEN (u, -infinity) AND (u, now), ordered by (user_id,
// due_at, work_key): a row comparison is no equality, so only rota_due_free_user serves
// the range in that order, and any other plan reads the whole range and sorts it, which
// costs more under any statistics. No planner setting could do this (both candidates are
// index scans), and the query keeps the shape every PostgreSQL since 8.2 plans the same way.
// A test loads that stale case with autovacuum off and checks the custom and the generic
// plans' shapes. Claim looks each key up by the primary key and updates by ctid, and
// Complete, Schedule and Unschedule write by primary key: unique lookups that statistics
// do not steer.
//
// Claim is one statement: it locks the due, unclaimed rows among the keys with FOR UPDATE
// SKIP LOCKED — so dispatchers on different machines never wait for each other and never
// claim one entry twice — gives each a token from the sequence rota_claim_token (tokens only
// grow, so no claim of an entry ever reuses an earlier one's token), and stamps LastServed,
// locking the users' rows in UserID order so concurrent claims cannot deadlock. Complete
// writes only while the row still carries the claim's token.
//
// Schedule, Complete and Unschedule keep free_at exact: each locks the user's row after its
// entry write and recomputes free_at in a new statement, whose snapshot sees every writer
// that committed before it. Claim leaves free_at alone (a claim can only raise it), so a user
// whose due entries are all claimed is visited by DueHeads, which finds nothing and skips it,
// until one of them completes.
//
// # Lease and task state
//
// A Lease is one row of rota_leases, named by NewLease's name. Acquire, Renew and Release
// lock that row (SELECT … FOR UPDATE) and decide with the rules of maintenance.MemoryLease,
// so daemons on different machines that race for the lease are serialized by the server:
// exactly one wins, the others get maintenance.ErrLeaseHeld. Tokens count up in the row and
// never go back; MaxHold caps every grant's expiry at AcquiredAt + MaxHold whoever renews.
// Expiry is judged by the now each caller passes, so daemons whose clocks disagree disagree
// about expiry by as much: keep the fleet's clocks synchronized and the TTL well above their
// skew.
//
// The StateStore keeps one row per task in rota_task_state. Its fence is the greater of
// the highest token of a Save that succeeded, kept in the one row of rota_task_fence, and
// the latest token of the schema's leases, so a holder whose grant was replaced is refused
// from the moment of the new grant: keep one StateStore and the one Lease that fences it
// per schema. Save locks the fence row and shares the lease rows' locks, refuses an older
// token with maintenance.ErrStaleToken and writes everything or nothing; Load reads the
// fence and the states from one snapshot. Names, times and tokens the server cannot hold
// are refused with maintenance.ErrInvalid before anything is sent, exactly as the
// in-memory Lease and StateStore refuse them. Their transactions set
// idle_in_transaction_session_timeout to 5 s, so a daemon whose connection hangs mid-call
// holds the lease row or the fence for at most that long.
//
// # Choices the core contract leaves open
//
//   - Times are stored as timestamptz, with microsecond precision: DueAt, LastRunAt and the
//     now given to Claim are truncated to the microsecond, and Claim rounds until up, so a
//     claim never ends before the until it was given. The Lease truncates now, so a grant
//     starts and expires up to a microsecond early, never late. Times come back in the
//     process's local time zone; compare them with Equal.
//   - Claim skips an entry whose row another transaction holds at that moment (a concurrent
//     Claim, or a Schedule or Complete in flight) instead of waiting for it.
//   - A user's row, and so its LastServed, outlives its entries: unscheduling everything
//     does not reset its place in the fair order.
//   - Several dispatchers over one index read the same heads, and dispatch.Select is
//     deterministic, so dispatchers that run at the same instant mostly select the same
//     entries; the losers see them as LostClaims. Correctness holds, but throughput does not
//     grow with the number of dispatchers: several dispatchers buy availability, not speed;
//     stagger their intervals so that their cycles rarely overlap.
//
// # Operations
//
// Every Index call takes one connection from the pool for one round trip (a Lease or
// StateStore call, a short transaction of a few), so a pool of a few connections per
// dispatcher or daemon is plenty.
// Claims and completions update rows of rota_due and rota_users all the time: leave
// autovacuum on (rota_users is created with fillfactor 70, so that stamping LastServed is a
// HOT update). The tables hold scheduling metadata only — no payload, no credentials — like
// every duework.Index.
//
// # Errors
//
// Backend errors are translated in one place: a cancelled or expired context wraps
// ctx.Err() (every call takes a context and stops when it ends), a value the server refuses
// (a NUL byte, a time out of range) wraps duework.ErrInvalid, a missing table wraps
// ErrNotMigrated, and everything else is wrapped as it is, so errors.As still finds the
// *pgconn.PgError. Bad input is refused with the core's sentinels before any query.
//
// # Running the tests
//
// The tests need a PostgreSQL server. They read its address from ROTA_TEST_DATABASE_URL
// (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable) and create a schema of
// their own per test, dropped at the end. Without a reachable server they skip, saying how
// to run them — except under CI (CI=true), where they fail. The helpers that do this, and
// the COPY loader of big fixtures, are package pgtest, which the bench module uses too.
// For example:
//
//	docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test postgres:17
//	cd postgres && go test -race ./...
package postgres
