// Package postgres runs rota on PostgreSQL, for services whose dispatchers, workers and
// maintenance daemons live on several machines and share one database.
//
// It is a nested module (github.com/rotaworks/rota/postgres) so that the core stays free of
// dependencies: it imports the core and github.com/jackc/pgx/v5, never the reverse.
//
// # Where to start
//
// OpenStores opens everything a service needs in one call at start-up (every replica may;
// see below): the pool, migrated, and every store over it.
//
//	st, err := postgres.OpenStores(ctx, "postgres://rota@db/app", "rota", postgres.StoresConfig{})
//	...
//	defer st.Close()
//	d, err := dispatch.New(st.Index, dispatch.Config{...}) // st.Index is a duework.Index
//	// st.Watchlist is a tenancy.Watchlist, st.Entitlements a tenancy.Entitlements,
//	// st.Lease and st.StateStore a maintenance.Lease and StateStore.
//
// Open does the first half alone, for a host that builds only some of the stores: it
// parses the URL, points every connection at the schema (quoted, created if it does not
// exist), connects, pings and runs Migrate; its error names the step that failed. Then
// NewIndex, NewWatchlist, NewEntitlements, NewLease and NewStateStore build the stores
// over the pool, sending nothing. A host that builds its own pool calls Migrate itself.
//
// Index.ListenDue wakes a host's Runner when work comes due on any replica (see "Waking
// the replicas" below). The Lease and the StateStore serve a fleet of maintenance daemons;
// give every daemon the same StoresConfig (the Lease's name and MaxHold) and its scheduler
// the same MaxHold:
//
//	sched, err := maintenance.NewScheduler(tasks, maintenance.Config{
//		Lease:      st.Lease,
//		StateStore: st.StateStore,
//		MaxHold:    cfg.MaxHold, // StoresConfig's; zero in both is maintenance.DefaultMaxHold
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
// Watchlist keeps one row per entry in rota_watchlist, keyed by (user_id, slug). Each call
// is one statement: List reads a tenant's whole list, ordered by slug, which is what a
// start-up sync of every tenant wants; AddMany writes a tenant's batch (a bulk import) all
// or nothing; GetMany reads the entries of a Runner's cycle, any number of tenants', by
// primary key, each under its own tenant; Tenants pages through the tenants with a loose
// index scan of the primary key, one index entry per tenant returned. Entitlements keeps
// one row per tenant given a plan in rota_plans; a tenant without one is on
// tenancy.PlanFree, as with tenancy.MemoryEntitlements, and SetPlan writes plans. Both are
// deny-by-default like the in-memory ones: every statement but Tenants' filters by the
// Context's user, and bad input (an AddedAt outside years 1 to 9999 UTC, which pgx would
// otherwise store wrapped) is refused before anything is sent.
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
// rota_due holds one row per entry: the duework.Entry columns and the current claim's token,
// until and whether it was started (claim_started). Its indexes:
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
// A claim always ends after its entry is due (CHECK rota_due_claim_after_due), so
// rota_due_claimed_user also holds a user's claims by their ends: a user's in-flight count
// is a range of it, one index entry per claim in flight.
//
// rota_users holds one row per user: its group (the lane the dispatcher routed it to; ""
// until then) and duework.Limits (weight, max_in_flight, every in nanoseconds, burst);
// LastServed; the parts of its ReadyAt — free_at, the least due_at of its unclaimed
// entries, claim_end_at, the least greatest(due_at, claim_until) of its claimed ones, and
// slot_at, the max_in_flight-th latest end among its claims (NULL with fewer claims or no
// cap); its rate mark (rate_mark, numeric nanoseconds since the Unix epoch, so that any
// Every is kept exactly) and stride position (pass); its pause (paused_until and
// pause_reason); its Turn (turn, the greatest of those instants, the rate's, the pause's
// while it counts and pass; NULL without entries); and the end of its hold. Every write to
// a user's entries sets them under the user's row lock, so a claim that ends needs no
// sweep: its end already is the user's ReadyAt, and it frees its slot by time. The index
// rota_users_queue (group, turn, user_id) is each group's queue in turn order, so a paused
// user waits later in it and costs a Ready nothing; rota_users_paused (user_id), over the
// users with a stored pause, is what Paused pages through; rota_users_limited (user_id),
// over the users with a cap, a rate or a weight, is where Claim, with rota_users_paused,
// finds out whether it must lock its users before it claims.
// Users are never deleted, so the table grows with tenant churn (about 250 bytes a user,
// indexes included, for short user IDs).
//
// # Cost of each call
//
// Every call is one round trip, and one transaction.
//
//   - Ready is one statement: the first Users rows of the group's range of
//     rota_users_queue with turn <= Now that are not held, locked FOR NO KEY UPDATE SKIP
//     LOCKED and held (a HOT update); then, per user, its in-flight count when it has
//     claims, the most entries its limits allow (the least of its free slots, its rate
//     allowance and PerUser × weight), a keyset range of that many unclaimed entries plus
//     one and, when its claim_end_at has passed, of its claims that have ended; then one
//     probe for Next. Its cost is what it returns, the claims in flight of the users it
//     returns, and the held or locked users it passes — never the number of ready users,
//     nor a user's backlog, and a limited user costs what an unlimited one does.
//   - Claim locks the users of its keys in UserID order first when any of them has a cap,
//     a rate or a weight, or is paused, so that it decides on their limits under the
//     locks; then, in a second statement whose snapshot sees every claim committed before
//     them, it claims, for each user, those of its keys within its free slots and rate
//     allowance in the order of the keys, each with a token from the sequence
//     rota_claim_token and its until, each row locked by its own write (a claim costs one
//     row version and no separate lock). Should that write wait more than a millisecond
//     for a row another transaction holds, which may be waiting for one of the users the
//     call holds, the call runs again and locks the keys first with SKIP LOCKED, passing
//     such rows over. When none of its users has a limit or a pause, the second statement
//     claims every key that is visible, in (UserID, WorkKey) order, waiting for a row
//     another write holds, and then locks the users it claimed for, in UserID order, and
//     should one of them have gained a limit meanwhile the call starts again with the locks
//     first (a user without limits is thus locked only while it is stamped, not for the
//     whole claim); a last statement, whose snapshot sees every write committed before
//     those locks, writes each user claimed for once: LastServed, the end of its hold, the
//     rate mark, the stride position, free_at (one probe of the user's unclaimed entries),
//     slot_at (for a user with a cap, up to that many index entries), claim_end_at (the
//     earlier of the stored one and until, probed only when the stored one is not after
//     now, as the call may then have claimed again the entry whose claim had ended) and
//     Turn, dropping a pause the serve ends. It claims
//     nothing of a user paused at its now. A claimer on any machine therefore never passes
//     a cap, a rate or a pause, however stale its Ready.
//   - CompleteMany and Unclaim are one statement for the whole batch (arrays unnested),
//     then a write per user. CompleteMany writes the entries that still carry their item's
//     claim in key order, each locked as it is written (a nested loop over the sorted
//     items); Unclaim locks them in key order first, since it leaves a started claim
//     unwritten. StartClaims is one statement that marks its items' entries started in key
//     order, each locked as it is written, so that of two calls starting one claim at once
//     the second sees the first's mark; it writes each entry once, a HOT update next to the
//     row it replaces (rota_due leaves 30 % of each page free), and a second round trip
//     only for a claim it found neither startable nor started. Invalid items are refused
//     before anything is sent, each with its own error.
//   - ScheduleMissing inserts a tenant's batch in one INSERT … ON CONFLICT DO NOTHING.
//   - Groups is a loose index scan of rota_users_queue: one probe per group, not per user.
//   - Route locks the named users in UserID order, then writes each once (probing slot_at
//     for a user with a cap); Release locks and writes in one statement.
//   - Schedule, Unschedule, Complete, UnscheduleClaimed write one entry by primary key and
//     recompute its user; Get reads one row.
//   - Pause and Resume write the user's row alone, by primary key, durably; Paused reads
//     rota_users_paused from the given user on, and costs what it returns plus the ended
//     pauses it passes (a Claim that serves a user drops the pause that serve ends).
//   - User reads the user's row by primary key and its in-flight count; Entries reads
//     limit rows of rota_due's primary key from the given work key on.
//
// A dispatch cycle is therefore Groups, one Ready per lane, one Claim and, for the users
// read and not served, one Release: its cost grows with the batch, not with the users
// waiting nor with any backlog. It writes each served user's row twice (the hold, then the
// claim, which moves the user to the back of its queue and so writes both of its indexes)
// where a first-come claim writes none: that, and the entries' own claim, is the price of
// fairness. BENCHMARKS.md, at the repository's root, has the figures.
//
// # A Runner's claims
//
// A bridge.Runner runs the items it claims in its own process: none is sent to a broker,
// and no other process learns their tokens. It claims them under a context that carries
// its Worker's set of local starts, and the Index writes those claims started in the claim
// itself. StartClaims under that set starts each of them once, without a round trip,
// while the claim lasts by the set's clock; after that it asks, and starts the claim if it
// is still current. Unclaim under the set hands back one that was not started (an item
// still waiting for a worker at a stop). Every other call, in any process, finds such a
// claim started: no copy of the item can start anywhere else. A claim counts as started
// from its Claim, so a Schedule or Unschedule of its entry by the host meanwhile ends it
// as it ends a running item's, and the item's completion then finds it lost, as a running
// one's does. This saves the Runner one statement per cycle, a write of each of its
// items' rows. A Worker fed by a broker (a Feeder's items) claims nothing under a set: its
// items' claims are started by StartClaims as the contract says.
//
// # Several dispatchers on one database
//
// Dispatchers on different machines share one database safely and divide the work. A
// Ready passes over the users another Ready or a writer holds locked at that moment (SKIP
// LOCKED) and over the users another dispatcher holds (held_until; see duework.Index on
// holds), so concurrent dispatchers read disjoint users and rarely lose a claim to each
// other; a user served goes to the back of its queue, where the next reader finds it. A
// Claim waits for an entry another transaction holds for that write when none of its
// users has a limit, and for a millisecond at most otherwise, and no entry is claimed
// twice: the claim is a row lock and a token that only grows. A worker that dies leaves its claims,
// and the slots they take, to end by themselves.
//
// Throughput grows with the dispatchers as far as the database's cores allow: each cycle
// is a handful of statements, which dispatchers on separate connections run in parallel,
// until the server's disk flushes (one per claim) or its CPU are the limit. Give each
// dispatcher a pool of a few connections.
//
// # Waking the replicas
//
// Schedule and ScheduleMissing notify the schema's channel (rota_due.<schema>, with
// pg_notify, in the same transaction) when an entry they write is due by the server's now,
// once per call. Index.ListenDue holds one connection that LISTENs there and calls its
// wake function, so that an entry scheduled due now on one replica starts a dispatch
// cycle on every replica at once, as River wakes its clients, instead of at the next
// interval. A notification is a hint: without it the next cycle finds the work all the
// same.
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
// range and sorts it. And the Index's statements run with sequential scans, bitmap scans,
// hash and merge joins and incremental sorts off, and without JIT compilation, for their
// own transaction only: each of their reads is a handful of index probes joined by nested
// loops, and the settings keep it so. Since that shape does not depend on the arguments,
// they also force the generic plan, which each connection makes once per statement. The
// calls that count a user's claims in flight
// (Ready, Claim, User) also run with sorts off: the count is ordered as
// rota_due_claimed_user is, so no other index can serve it, and every other sort in them is
// of a handful of rows no index delivers in order. A test loads both cases with autovacuum
// off and checks the custom and the generic plan of every statement.
//
// # Locks, and why nothing deadlocks
//
// User rows are locked in UserID order, and no call waits for an entry row while it holds
// a user row for longer than a millisecond: the writers lock their entry rows first
// (several in (UserID, WorkKey) order) and their users after; Claim locks its users first
// and then waits for an entry row at most a millisecond (lock_timeout), after which it
// takes entry rows only with SKIP LOCKED, which never waits — or, when none of its users
// has a limit, is such a writer: it locks its entry rows in (UserID, WorkKey) order and
// the users it claimed for after them. A call that holds a user therefore waits only for
// a user that sorts after it or, that millisecond, for an entry, so no cycle of waits
// outlasts it. Ready never waits (it locks users
// with SKIP LOCKED and no entries). An enqueue waits for a user row that a Claim or
// CompleteMany holds, for the length of that call: keep dispatch transactions short, which
// one round trip does.
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
// Limits.Every is kept to the nanosecond and the rate mark exactly; the instant the rate
// next allows an item is rounded up to the microsecond when it becomes a Turn, which, every
// now being whole microseconds, makes the user ready exactly when its rate allows.
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
// the highest token of a write that succeeded, kept in the one row of rota_task_fence, and
// the latest token of the schema's leases, so a holder whose grant was replaced is refused
// from the moment of the new grant: keep one StateStore and the one Lease that fences it
// per schema. Save and Update lock the fence row and share the lease rows' locks, so every
// write of the schema's task state is serialized: Save refuses an older token with
// maintenance.ErrStaleToken, Update's read and write of its tasks are atomic across every
// daemon — a task's claim is taken once however many daemons race for it — and both write
// everything or nothing; Load reads the fence and the states from one snapshot. A
// maintenance poll makes at most two Updates and a run one per extension and one at its
// end, each three round trips. Names, times and tokens the server cannot hold
// are refused with maintenance.ErrInvalid before anything is sent, exactly as the
// in-memory Lease and StateStore refuse them. Their transactions set
// idle_in_transaction_session_timeout to 5 s, so a daemon whose connection hangs mid-call
// holds the lease row or the fence for at most that long.
//
// # Operations
//
// Claims, completions and holds update rows of rota_due and rota_users on every cycle:
// leave autovacuum on. Writing a hold or LastServed, or starting a claim, changes no
// indexed column and stays a HOT update (rota_users and rota_due leave 30 % of each page
// free, fillfactor 70); a served user's Turn moves, which
// leaves a dead entry at the front of its queue. The first read to pass it marks it dead,
// but only VACUUM removes it, so until then every Groups and Ready steps over it, and
// behind many serves reads their pages before the first live user. Migrate therefore sets
// rota_users to be vacuumed after 10,000 dead rows rather than a fifth of the table. Autovacuum visits a database
// once per autovacuum_naptime (a minute by default), so a deployment that serves more than
// some 10,000 users a minute should lower the naptime, or register Index.QueueVacuumTask
// with its maintenance scheduler, which vacuums rota_users every few seconds off the heavy
// lease; such a vacuum reads the table's dead rows and its pages' visibility, not every
// user. No vacuum
// removes a row that a transaction still open anywhere in the database may see, so a
// long transaction (a report, a forgotten session) keeps every serve since it began in
// front of the queues until it ends.
//
// Ready, Release and Route commit without waiting for the write-ahead log to reach the
// disk: a server crash can lose the last of them, which only ends a hold early, brings one
// back until it lapses, or leaves a user in its previous group with its previous limits,
// to be routed again. Claims, completions and
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
