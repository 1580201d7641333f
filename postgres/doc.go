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
// NewIndex implements duework.Index, and duework.MissingScheduler and duework.ClaimGuard
// besides; NewLease and NewStateStore implement maintenance.Lease and
// maintenance.StateStore for a fleet of maintenance daemons:
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
// Watchlist.GetMany (tenancy.BatchGetter) reads the entries of a Runner's cycle, any
// number of tenants', in one query by primary key, each under its own tenant.
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
// release does not know gives ErrSchemaTooNew and is left alone. A database of an earlier
// release is upgraded in place, entries, claims and LastServed included; stop the old
// release's dispatchers and workers first, since they do not keep the new columns.
//
// # Tables
//
// rota_due holds one row per entry: the duework.Entry columns and the current claim's token
// and until. Its indexes:
//
//   - rota_due_free_user (user_id, due_at, work_key), over unclaimed rows: a user's entries in
//     the order Ready hands them out;
//   - rota_due_claimed_user (user_id, greatest(due_at, claim_until)), over claimed rows: a
//     user's claims by the instant each entry is visible again;
//   - rota_due_free (due_at, user_id, work_key) and rota_due_claimed (claim_until), which
//     serve DueBefore.
//
// A claimed row leaves the due path at once, and comes back, without anyone touching it,
// when its claim ends.
//
// rota_users holds one row per user: its group (the lane the dispatcher routed it to; ""
// until then), LastServed, the two halves of its ReadyAt (the earliest instant at which one
// of its entries is visible) — free_at, the least due_at of its unclaimed entries, and
// claim_end_at, the least greatest(due_at, claim_until) of its claimed ones — its Turn (the
// later of ReadyAt and LastServed; NULL without entries) and the end of its hold. Every
// write to a user's entries sets them under the user's row lock, so a claim that ends needs
// no sweep: its end already is the user's ReadyAt. The index rota_users_queue (group, turn,
// user_id) is each group's queue in turn order.
// Users are never deleted, so the table grows with tenant churn (about 200 bytes a user,
// indexes included, for short user IDs).
//
// # Cost of each call
//
// Every call is one round trip, and one transaction.
//
//   - Ready is one statement: the first Users rows of the group's range of
//     rota_users_queue with turn <= Now that are not held, locked FOR NO KEY UPDATE SKIP
//     LOCKED and held (a HOT update); then, per user, a keyset range of its first PerUser+1
//     unclaimed entries and, when its claim_end_at has passed, of its claims that have
//     ended; then one probe for Next. Its cost is what it returns, plus the held or locked
//     users it passes — never the number of ready users, nor a user's backlog.
//   - Claim locks its keys by primary key with SKIP LOCKED, gives each a token from the
//     sequence rota_claim_token and its until, then locks the users it served in UserID
//     order and writes each once: LastServed, the end of its hold, free_at (one probe of
//     the user's unclaimed entries), claim_end_at (the earlier of the stored one and until,
//     probed only for a user of which it claimed again an entry whose claim had ended) and
//     Turn.
//   - CompleteMany is one statement for the whole batch (arrays unnested), locking the
//     entries that still carry their item's claim in key order, then a write per user.
//     Invalid items are refused before anything is sent, each with its own error.
//   - ScheduleMissing inserts a tenant's batch in one INSERT … ON CONFLICT DO NOTHING.
//   - Groups is a loose index scan of rota_users_queue: one probe per group, not per user.
//   - Route and Release lock the named users in UserID order and write each once.
//   - Schedule, Unschedule, Complete, UnscheduleClaimed write one entry by primary key and
//     recompute its user; Get and CheckClaim read one row.
//
// A dispatch cycle is therefore Groups, one Ready per lane, one Claim and, for the users
// read and not served, one Release: its cost grows with the batch, not with the users
// waiting nor with any backlog. It writes each served user's row twice (the hold, then the
// claim, which moves the user to the back of its queue and so writes both of its indexes)
// where a first-come claim writes none: that, and the entries' own claim, is the price of
// fairness. On two cores shared with the server, a cycle of 1,000 items costs about three
// times a first-come claim of the 1,000 oldest rows; reading 1,000 users with their entries
// and moving them to the back of the queue, the least any fair cycle does, already costs
// about twice, before the holds, the locks and ReadyAt that make it safe.
//
// # Several dispatchers on one database
//
// Dispatchers on different machines share one database safely and divide the work. A
// Ready passes over the users another Ready or a writer holds locked at that moment (SKIP
// LOCKED) and over the users another dispatcher holds (held_until), so concurrent
// dispatchers read disjoint users and rarely lose a claim to each other; a user served goes
// to the back of its queue, where the next reader finds it. Claim never waits for an entry
// another transaction holds, and no entry is claimed twice: the claim is a row lock and a
// token that only grows. A dispatcher that dies between Ready and Claim hides its users for
// HoldFor at most; a worker that dies leaves its claims to end by themselves.
//
// Throughput grows with the dispatchers as far as the database's cores allow: each cycle
// is a handful of statements, which dispatchers on separate connections run in parallel.
// On two cores shared with the server, four dispatchers claim about one and a half times
// what one does; on more cores, expect more, until the server's disk flushes (one per
// claim) or its CPU are the limit. Give each dispatcher a pool of a few connections.
//
// # Plans that stale statistics cannot spoil
//
// A bulk load (a fresh deployment importing a backlog, a migration from another queue)
// leaves statistics that autovacuum will not refresh until a tenth of the rows change. If
// ANALYZE ran while one tenant's backlog was the whole of rota_due, the planner believes
// every row is that tenant's; if it ran later, it believes each user holds a few entries,
// the deep one included. Either belief can turn a per-user read into a walk of that
// tenant's backlog, or a lookup of a thousand users into a scan of them all.
//
// So the per-user reads are keyset ranges, (user_id, due_at) BETWEEN (u, -infinity) AND
// (u, now) ordered by (user_id, due_at, work_key): a row comparison is no equality, so only
// rota_due_free_user serves the range in that order, and every other plan reads the whole
// range and sorts it. And the dispatch statements run with sequential scans, bitmap scans,
// hash and merge joins and incremental sorts off, and without JIT compilation, for their
// own transaction only: each of their reads is a handful of index probes joined by nested
// loops, and the settings keep it so. A test loads both cases with autovacuum off and
// checks the custom and the generic plan of every dispatch read.
//
// # Locks, and why nothing deadlocks
//
// Entry rows are locked before user rows; several entry rows in (UserID, WorkKey) order or
// with SKIP LOCKED, several user rows in UserID order. No call waits for an entry while it
// holds a user, and none waits for a user while it holds one that sorts after it, so no
// cycle of waits can form. Ready never waits (it locks users with SKIP LOCKED and no
// entries). An enqueue waits for a user row that a Claim or CompleteMany holds, for the
// length of that statement: keep dispatch transactions short, which one round trip does.
//
// # Time
//
// Times are stored as timestamptz, with microsecond precision, and must lie in
// [duework.MinTime, duework.MaxTime] (years 1 to 9999 UTC); others are duework.ErrInvalid
// before anything is sent, since pgx would wrap them into other times. DueAt, LastRunAt and
// every now are truncated to the microsecond. Claim's until and Ready's Now+Hold are rounded
// up, so neither a claim nor a hold ends before the instant it was given; Release matches
// heldUntil rounded up the same way, so a reader that passes its own Now+Hold, nanoseconds
// and all, ends its own holds (and any other hold that ends in the same microsecond).
// Times come back in the process's local time zone; compare them with Equal.
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
// # Operations
//
// Claims, completions and holds update rows of rota_due and rota_users on every cycle:
// leave autovacuum on. Writing a hold or LastServed changes no indexed column and stays a
// HOT update (rota_users is created with fillfactor 70); a served user's Turn moves, which
// leaves a dead entry at the front of its queue. The first read to pass it marks it dead,
// but only VACUUM removes it, so until then every Groups and Ready steps over it. Behind a
// million serves, Groups took 5.5 ms instead of 0.4 and Ready of 1,000 users 12.8 ms
// instead of 9.1 (BenchmarkReadyBehindServes). Migrate therefore sets rota_users to be vacuumed
// after 10,000 dead rows rather than a fifth of the table. Autovacuum visits a database
// once per autovacuum_naptime (a minute by default), so a deployment that serves more than
// some 10,000 users a minute should lower the naptime, or register Index.QueueVacuumTask
// with its maintenance scheduler, which vacuums rota_users every few seconds off the heavy
// lease: at 100,000 users and 10,000 dead rows a vacuum takes about 50 ms. No vacuum
// removes a row that a transaction still open anywhere in the database may see, so a
// long transaction (a report, a forgotten session) keeps every serve since it began in
// front of the queues until it ends.
//
// Ready, Release and Route commit without waiting for the write-ahead log to reach the
// disk: a server crash can lose the last of them, which only ends a hold early, brings one
// back until it lapses, or leaves a user to be routed again. Claims, completions and
// entries are written durably. The tables hold scheduling metadata only — no payload, no
// credentials — like every duework.Index.
//
// # Errors
//
// Backend errors are translated in one place: a cancelled or expired context wraps
// ctx.Err() (every call takes a context and stops when it ends), a value the server refuses
// (a NUL byte, a key too long to index) wraps duework.ErrInvalid, a missing table wraps
// ErrNotMigrated, and everything else is wrapped as it is, so errors.As still finds the
// *pgconn.PgError. Bad input — times out of range, limits above duework.MaxLimit, invalid
// IDs, tiers and groups — is refused with the core's sentinels before any statement; Claim
// skips a key no entry could have, as it skips an absent one.
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
