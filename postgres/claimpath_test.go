package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// heldUser schedules user u's entries a, b and c, due at t0, and begins a transaction that
// runs hold, a statement that locks u's row or rows of its entries; the transaction is rolled back at the end of
// the test unless it was committed. It returns the pool, an Index over it, the entries'
// keys and the transaction.
func heldUser(t *testing.T, hold string) (*pgxpool.Pool, *postgres.Index, []duework.Key, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	var keys []duework.Key
	for _, k := range []string{"a", "b", "c"} {
		keys = append(keys, schedule(t, idx, "u", k, t0).Key())
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, hold); err != nil {
		t.Fatal(err)
	}
	return pool, idx, keys, tx
}

// inClaimRows is the statement of Claim a test waits in, sqlClaim, which claims the
// entries and then locks the users claimed for, as the start of its text in
// pg_stat_activity (which keeps the first 1 kB by default).
const inClaimRows = "%WITH lim AS MATERIALIZED%"

// claimBehind starts Claim of keys at now in a goroutine while tx holds a row, waits
// until the Claim waits for it in the statement whose text matches in, runs during (with
// the Claim still waiting), commits tx, and returns what the Claim claimed.
func claimBehind(t *testing.T, pool *pgxpool.Pool, idx *postgres.Index, tx pgx.Tx, keys []duework.Key, now time.Time, in string, during func()) []string {
	t.Helper()
	ctx := context.Background()
	done := claimAsync(idx, keys, now)
	waitForClaim(t, pool, tx, in)
	select {
	case r := <-done:
		t.Fatalf("Claim returned %v, %v while the row was held", r.cs, r.err)
	default:
	}
	during()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return (<-done).workKeys(t)
}

// claimResult is what a Claim started by claimAsync returned.
type claimResult struct {
	cs  []duework.Claim
	err error
}

// claimAsync starts Claim of keys from now for a minute in a goroutine, and returns where
// its result will come.
func claimAsync(idx *postgres.Index, keys []duework.Key, now time.Time) <-chan claimResult {
	done := make(chan claimResult, 1)
	go func() {
		cs, err := idx.Claim(context.Background(), keys, now, now.Add(time.Minute))
		done <- claimResult{cs, err}
	}()
	return done
}

// workKeys fails the test if the Claim failed, and otherwise returns the work keys it
// claimed, in order.
func (r claimResult) workKeys(t *testing.T) []string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Claim: %v", r.err)
	}
	var got []string
	for _, c := range r.cs {
		got = append(got, c.Entry.WorkKey)
	}
	return got
}

// waitForClaim waits until a backend waits for tx's lock in the statement of Claim whose
// text matches in.
func waitForClaim(t *testing.T, pool *pgxpool.Pool, tx pgx.Tx, in string) {
	t.Helper()
	ctx := context.Background()
	var xid string
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'transactionid' AND l.transactionid::text = $1 AND NOT l.granted
				AND a.query LIKE $2`, xid, in).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatalf("no Claim waited for the held row in %q within 10 s", in)
}

// A Claim of users without limits locks their rows only to stamp them, after its entries
// are claimed: while another transaction holds the user's row, the Claim has already
// locked the user's entries, and once the row is free it returns every key.
func TestClaimOfUsersWithoutLimitsLocksThemLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, idx, keys, tx := heldUser(t, `SELECT 1 FROM rota_users WHERE user_id = 'u' FOR NO KEY UPDATE`)
	got := claimBehind(t, pool, idx, tx, keys, t0, inClaimRows, func() {
		var free int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM rota_due WHERE user_id = 'u' FOR UPDATE SKIP LOCKED) f`).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free != 0 {
			t.Errorf("%d of u's 3 entries unlocked while Claim waits for u's row; want all 3 locked by the Claim", free)
		}
	})
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Claim = %v; want a b c", got)
	}
	checkReadyAt(t, pool)
}

// A limit committed while a Claim of users without limits claims their entries — after
// the Claim read that they had none, before it locked their rows — holds: the Claim
// starts again under the users' locks and claims only what the new limits allow.
func TestClaimHoldsLimitsSetWhileItClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit string // run in the transaction that holds the user's row
		want  []string
	}{
		{"cap", `UPDATE rota_users SET max_in_flight = 1 WHERE user_id = 'u'`, []string{"a"}},
		{"rate", `UPDATE rota_users SET every = 60000000000, burst = 2 WHERE user_id = 'u'`, []string{"a", "b"}},
		{"pause", `UPDATE rota_users SET paused_until = '9999-01-01' WHERE user_id = 'u'`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, idx, keys, tx := heldUser(t, tc.limit)
			if got := claimBehind(t, pool, idx, tx, keys, t0, inClaimRows, func() {}); !slices.Equal(got, tc.want) {
				t.Fatalf("Claim = %v; want %v", got, tc.want)
			}
			var claimed int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM rota_due WHERE claim_token IS NOT NULL`).Scan(&claimed); err != nil {
				t.Fatal(err)
			}
			if claimed != len(tc.want) {
				t.Fatalf("%d entries claimed in the table; want %d", claimed, len(tc.want))
			}
		})
	}
}

// A Claim of users without limits waits for an entry another transaction holds, rather
// than passing over it, and claims it only if it is still visible once that transaction
// ends: the claim's own write is the entry's lock.
func TestClaimOfUsersWithoutLimitsWaitsForAHeldEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		during string // run in the transaction that holds entry b, before it commits
		want   []string
	}{
		{"left as it was", ``, []string{"a", "b", "c"}},
		{"claimed meanwhile", `UPDATE rota_due SET claim_token = nextval('rota_claim_token'), claim_until = $1
			WHERE user_id = 'u' AND work_key = 'b'`, []string{"a", "c"}},
		{"due later meanwhile", `UPDATE rota_due SET due_at = $1 WHERE user_id = 'u' AND work_key = 'b'`, []string{"a", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, idx, keys, tx := heldUser(t, `SELECT 1 FROM rota_due WHERE user_id = 'u' AND work_key = 'b' FOR UPDATE`)
			got := claimBehind(t, pool, idx, tx, keys, t0, inClaimRows, func() {
				if tc.during == "" {
					return
				}
				if _, err := tx.Exec(ctx, tc.during, t0.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Claim = %v; want %v", got, tc.want)
			}
			if tc.during == "" {
				checkReadyAt(t, pool)
			}
		})
	}
}

// Claims of users without limits that name the same entries in opposite orders, at once,
// neither deadlock nor claim an entry twice: each locks the entries in key order. Every
// round claims again the entries whose claims the last round made and let end.
func TestClaimsInOppositeOrdersShareTheEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	idx := postgres.NewIndex(pool)
	var keys []duework.Key
	for u := range 4 {
		for k := range 25 {
			keys = append(keys, schedule(t, idx, fmt.Sprintf("u%d", u), fmt.Sprintf("k%02d", k), t0).Key())
		}
	}
	backwards := slices.Clone(keys)
	slices.Reverse(backwards)
	for round := range 20 {
		now := t0.Add(time.Duration(round) * time.Minute)
		var (
			wg   sync.WaitGroup
			got  [2][]duework.Claim
			errs [2]error
		)
		for i, ks := range [][]duework.Key{keys, backwards} {
			wg.Go(func() { got[i], errs[i] = idx.Claim(ctx, ks, now, now.Add(time.Second)) })
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		seen := map[duework.Key]bool{}
		for _, c := range slices.Concat(got[0], got[1]) {
			if seen[c.Entry.Key()] {
				t.Fatalf("round %d: %v claimed twice", round, c.Entry.Key())
			}
			seen[c.Entry.Key()] = true
		}
		if len(seen) != len(keys) {
			t.Fatalf("round %d: %d of %d entries claimed", round, len(seen), len(keys))
		}
		checkReadyAt(t, pool)
	}
}

// A Claim of a user with a limit waits for an entry another transaction holds only
// briefly: it holds the user's row meanwhile, and the holder, a writer of the entry, may
// be about to wait for that row. It then claims again, passing the held entry over, and
// returns the others while the entry is still held.
func TestClaimOfALimitedUserPassesAHeldEntryOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, idx, keys, tx := heldUser(t, `UPDATE rota_users SET max_in_flight = 5 WHERE user_id = 'u'`)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM rota_due WHERE user_id = 'u' AND work_key = 'b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var got []string
	select {
	case r := <-claimAsync(idx, keys, t0):
		got = r.workKeys(t)
	case <-time.After(10 * time.Second):
		t.Fatal("Claim still waits for the held entry after 10 s")
	}
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("Claim = %v; want a c, passing over b", got)
	}
	// As a writer of the entry would next: lock its user, which the Claim no longer holds.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM rota_users WHERE user_id = 'u' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkReadyAt(t, pool)
}
