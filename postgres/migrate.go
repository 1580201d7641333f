package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migration is one numbered step of the schema. Steps are append-only: a released step is
// never edited, a change is a new step.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the whole schema history, in order.
var migrations = []migration{
	{1, "due-work index", `
CREATE TABLE rota_users (
	user_id     text COLLATE "C" PRIMARY KEY,
	last_served timestamptz,
	-- free_at is a lower bound of the earliest due_at among the user's unclaimed entries,
	-- NULL only when it has none. Claim leaves it alone (a claim can only raise that
	-- minimum); Schedule, Complete and Unschedule recompute it exactly under this row's
	-- lock. Step 3 makes it exact.
	free_at     timestamptz
) WITH (fillfactor = 70);
CREATE INDEX rota_users_free_at ON rota_users (free_at) WHERE free_at IS NOT NULL;

CREATE TABLE rota_due (
	user_id     text COLLATE "C" NOT NULL,
	work_key    text COLLATE "C" NOT NULL,
	tier        text NOT NULL,
	due_at      timestamptz NOT NULL,
	last_run_at timestamptz,
	miss_streak bigint NOT NULL,
	claim_token bigint,
	claim_until timestamptz,
	PRIMARY KEY (user_id, work_key),
	CHECK ((claim_token IS NULL) = (claim_until IS NULL))
);
-- Unclaimed entries only: a claimed row leaves the due path at once and comes back through
-- rota_due_claimed, by claim_until, when its claim ends.
CREATE INDEX rota_due_free_user ON rota_due (user_id, due_at, work_key) WHERE claim_until IS NULL;
CREATE INDEX rota_due_free ON rota_due (due_at, user_id, work_key) WHERE claim_until IS NULL;
CREATE INDEX rota_due_claimed ON rota_due (claim_until) WHERE claim_until IS NOT NULL;
CREATE SEQUENCE rota_claim_token AS bigint;
`},
	{2, "maintenance lease and task state", `
CREATE TABLE rota_leases (
	name        text COLLATE "C" PRIMARY KEY,
	-- token is the latest grant's; it only grows. held is false once that grant was
	-- released (or before the first one).
	token       bigint NOT NULL DEFAULT 0,
	held        boolean NOT NULL DEFAULT false,
	holder      text NOT NULL DEFAULT '',
	acquired_at timestamptz,
	expires_at  timestamptz
);

-- The StateStore's fence: the highest token of a Save that succeeded. One row.
CREATE TABLE rota_task_fence (
	id    boolean PRIMARY KEY DEFAULT true CHECK (id),
	token bigint NOT NULL
);

CREATE TABLE rota_task_state (
	name          text COLLATE "C" PRIMARY KEY,
	class         integer NOT NULL,
	rank          integer NOT NULL,
	last_run_at   timestamptz,
	last_outcome  text NOT NULL,
	last_error    text NOT NULL,
	running       boolean NOT NULL,
	running_since timestamptz,
	running_by    text NOT NULL,
	running_token bigint NOT NULL,
	deferred_since timestamptz,
	deferred_at   timestamptz,
	deferrals     bigint NOT NULL,
	defer_reason  text NOT NULL,
	defer_blocker text NOT NULL
);
`},
	{3, "turn queues", `
-- Every user gets its group, the two halves of its ReadyAt and its hold. free_at (a lower
-- bound in step 1) becomes exact: the earliest due_at of the user's unclaimed entries;
-- claim_end_at is the earliest instant at which one of its claimed entries is visible again,
-- greatest(due_at, claim_until); either is NULL when there is no such entry. ReadyAt is the
-- lesser of the two. Every write to a user's entries sets both under the user's row lock, so
-- a claim that ends by time needs no sweep: its end is already the user's ReadyAt.
ALTER TABLE rota_users
	ADD COLUMN group_name   text COLLATE "C" NOT NULL DEFAULT '',
	ADD COLUMN claim_end_at timestamptz,
	ADD COLUMN held_until   timestamptz;
-- turn is max(ReadyAt, last_served), NULL for a user without entries. It is a plain column,
-- written with free_at and claim_end_at, so that a write of last_served or held_until alone
-- changes no indexed column and stays a HOT update.
ALTER TABLE rota_users ADD COLUMN turn timestamptz;
INSERT INTO rota_users (user_id) SELECT DISTINCT user_id FROM rota_due ON CONFLICT (user_id) DO NOTHING;
DROP INDEX rota_users_free_at;
-- A user's claimed entries by the instant they become visible again: claim_end_at's
-- recomputation, and Ready's read of the claims that ended.
CREATE INDEX rota_due_claimed_user ON rota_due (user_id, greatest(due_at, claim_until)) WHERE claim_until IS NOT NULL;
UPDATE rota_users u SET free_at = r.free_at, claim_end_at = r.claim_end_at,
	turn = CASE WHEN r.free_at IS NOT NULL OR r.claim_end_at IS NOT NULL THEN greatest(least(r.free_at, r.claim_end_at), u.last_served) END
FROM (SELECT v.user_id,
		(SELECT min(d.due_at) FROM rota_due d WHERE d.user_id = v.user_id AND d.claim_until IS NULL) AS free_at,
		(SELECT min(greatest(d.due_at, d.claim_until)) FROM rota_due d WHERE d.user_id = v.user_id AND d.claim_until IS NOT NULL) AS claim_end_at
	FROM rota_users v) r
WHERE u.user_id = r.user_id;
-- Each group's queue in (turn, user_id) order: Ready reads its front, Groups skips from one
-- group to the next.
CREATE INDEX rota_users_queue ON rota_users (group_name, turn, user_id) WHERE turn IS NOT NULL;
`},
	{4, "watchlist and entitlements", `
CREATE TABLE IF NOT EXISTS rota_watchlist (
	user_id  text COLLATE "C" NOT NULL,
	slug     text COLLATE "C" NOT NULL,
	tier     text NOT NULL,
	added_at timestamptz NOT NULL,
	PRIMARY KEY (user_id, slug)
);

-- A tenant without a row is on the free plan.
CREATE TABLE IF NOT EXISTS rota_plans (
	user_id text COLLATE "C" PRIMARY KEY,
	plan    text NOT NULL CHECK (plan IN ('free', 'plus', 'pro'))
);
`},
	{5, "queue upkeep", `
-- Every serve moves a user to the back of its queue and leaves its old entry of
-- rota_users_queue dead at the front, where every read of the queue steps over it until
-- VACUUM removes it: behind 1,000,000 serves, Groups and Ready each walk some 7,600 index
-- pages before the first live user. The server's default waits
-- for a fifth of the table to be dead, 200,000 serves at a million users; vacuum rota_users
-- after 10,000 instead, whatever its size. Its rows are small, so each vacuum is short.
ALTER TABLE rota_users SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);
`},
	{6, "flow control", `
-- Each user's duework.Limits, as Route stores them (zero: weight 1, no cap, no rate); every
-- is in nanoseconds. rate_mark is the rate's one timestamp, nanoseconds since the Unix
-- epoch (numeric, so that an Every of 1 ns is kept exactly over years 1 to 9999), NULL
-- until the user's first rate-limited claim. pass is its stride position, the part of Turn
-- that serves move; it starts at last_served, so no Turn changes. slot_at is
-- the instant its in-flight count falls below max_in_flight: the max_in_flight-th latest
-- claim_until among its claims, NULL with fewer claims or no cap. Every write of a user's
-- entries sets it with free_at and claim_end_at, under the user's row lock, so a claim that
-- ends by time frees its slot with no sweep. None of them is indexed: writing them keeps
-- an update HOT.
ALTER TABLE rota_users
	ADD COLUMN weight        integer NOT NULL DEFAULT 0,
	ADD COLUMN max_in_flight integer NOT NULL DEFAULT 0,
	ADD COLUMN every         bigint NOT NULL DEFAULT 0,
	ADD COLUMN burst         integer NOT NULL DEFAULT 0,
	ADD COLUMN rate_mark     numeric,
	ADD COLUMN pass          timestamptz,
	ADD COLUMN slot_at       timestamptz;
UPDATE rota_users SET pass = last_served WHERE last_served IS NOT NULL;
-- A claim always ends after its entry is due (Claim claims only entries due by now, until
-- a later instant, and every write of due_at ends the claim), so that
-- greatest(due_at, claim_until), by which rota_due_claimed_user holds a user's claims, is
-- the claim's end: the in-flight count and slot_at read it there. NOT VALID: the rows of
-- earlier releases were written under the same rule.
ALTER TABLE rota_due ADD CONSTRAINT rota_due_claim_after_due CHECK (claim_until > due_at) NOT VALID;
`},
	{7, "host plans", `
-- A plan is any name the host gives (tenancy.PlanID.Valid, checked before anything is
-- sent), no longer only free, plus or pro: drop the CHECK step 4 put on rota_plans.plan,
-- whatever it was named — every CHECK on that column alone, and nothing else. Every row
-- stays as it is.
DO $$
DECLARE c name;
BEGIN
	FOR c IN
		SELECT con.conname FROM pg_constraint con
		JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attname = 'plan'
		WHERE con.conrelid = 'rota_plans'::regclass AND con.contype = 'c' AND con.conkey = ARRAY[a.attnum]
	LOOP
		EXECUTE format('ALTER TABLE rota_plans DROP CONSTRAINT %I', c);
	END LOOP;
END
$$;
`},
	{8, "task claims", `
-- A running flag is a claim that lapses at running_until unless its run extends it. The
-- flags an earlier release left keep the bound they had there with its default knobs:
-- MaxHold + LeaseTTL, 2 h 05 min from their start.
ALTER TABLE rota_task_state ADD COLUMN running_until timestamptz;
UPDATE rota_task_state
SET running_until = least(running_since + interval '2 hours 5 minutes', timestamptz '9999-12-31 23:59:59.999999+00')
WHERE running AND running_since IS NOT NULL;
`},
	{9, "pauses, started claims and error streaks", `
-- Each user's pause (Index.Pause): paused_until NULL for none, and pause_reason, '' without
-- one. The pause counts while paused_until is after last_served (or the user was never
-- served), and while it counts it is part of turn (turnOf). rota_users_paused holds the
-- users with a stored pause by user_id, so that Paused pages through them alone; an update
-- that leaves paused_until as it was stays HOT.
ALTER TABLE rota_users
	ADD COLUMN paused_until timestamptz,
	ADD COLUMN pause_reason text NOT NULL DEFAULT '';
CREATE INDEX rota_users_paused ON rota_users (user_id) WHERE paused_until IS NOT NULL;
-- error_streak is Entry.ErrorStreak. claim_started marks the current claim started
-- (Index.StartClaims); every write that gives an entry a new claim, or none, clears it.
-- The defaults are what every row of an earlier release is: no failures, no claim started.
ALTER TABLE rota_due
	ADD COLUMN error_streak bigint NOT NULL DEFAULT 0,
	ADD COLUMN claim_started boolean NOT NULL DEFAULT false,
	ADD CONSTRAINT rota_due_started_claimed CHECK (claim_token IS NOT NULL OR NOT claim_started);
`},
	{10, "room for started claims", `
-- StartClaims changes no indexed column: with room on the row's page its write is a HOT
-- update, one new row version and no index entry, instead of a version and an entry in each
-- of the claimed row's indexes. Leave that room on every page written from now on; rows
-- already stored are left where they are, and their pages gain room as claims and
-- completions move them.
ALTER TABLE rota_due SET (fillfactor = 70);
`},
	{11, "users with limits", `
-- The users with a cap, a rate or a weight, by user_id. Claim asks this index, and
-- rota_users_paused, whether any user of its keys has a limit before it decides how to lock
-- them; it holds only the users that have one, so that for users without limits the answer
-- costs a look at an index of a few pages, not a read of each user's row.
CREATE INDEX rota_users_limited ON rota_users (user_id) WHERE max_in_flight > 0 OR every > 0 OR weight > 1;
`},
}

// migrateLockKey is the first key of the transaction-level advisory lock that serializes
// concurrent Migrate calls; the second is a hash of the schema, so that migrations of
// different schemas in one database do not wait for each other.
const migrateLockKey = 0x726f7461 // "rota"

// Migrate creates or upgrades rota's tables, indexes and sequences in the pool's current
// schema (the first schema of its search_path) and records each applied step in
// rota_schema_migrations. It is idempotent, and safe when several processes run it at once:
// it runs in one transaction under a transaction-level advisory lock, so a second caller
// waits and then finds nothing left to do. A database that holds steps this package does not
// know gives ErrSchemaTooNew and is left untouched.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return interpret(ctx, "Migrate", migrate(ctx, pool, migrations))
}

// migrate applies, in order, every step of steps that the schema has not recorded — an
// earlier step added after later ones were applied included — under the advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, steps []migration) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, migrateLockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS rota_schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version FROM rota_schema_migrations ORDER BY version`)
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		applied := make(map[int]bool, len(versions))
		for _, v := range versions {
			applied[v] = true
		}
		known := make(map[int]bool, len(steps))
		for _, m := range steps {
			known[m.version] = true
		}
		for _, v := range versions {
			if !known[v] {
				return fmt.Errorf("%w: it holds step %d, this package knows up to %d", ErrSchemaTooNew, v, steps[len(steps)-1].version)
			}
		}
		for _, m := range steps {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("step %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO rota_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
}
