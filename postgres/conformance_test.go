package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The Index keeps the whole duework.Index contract, checked by the core's conformance suite
// against the real server. The suite asks for thousands of fresh indexes, so they share one
// migrated schema and each call empties its tables (and checks the ReadyAt invariant of the
// index it replaces). Its connections commit without waiting for the disk, which changes
// nothing the suite can see and saves a flush on each of its many thousand writes.
func TestIndexConformance(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgtest.Schema(t, "rota_test")
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	indextest.Run(t, func(t *testing.T) duework.Index {
		checkReadyAt(t, pool)
		if _, err := pool.Exec(context.Background(), `DELETE FROM rota_due; DELETE FROM rota_users`); err != nil {
			t.Fatal(err)
		}
		return postgres.NewIndex(pool)
	})
}

// fataler is what the helpers need of a test: a testing.TB or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// checkReadyAt asserts the invariant every read of the queues relies on, computing each
// user's columns afresh in Go from its entries: free_at is exactly the least due_at of its
// unclaimed entries, claim_end_at the least greatest(due_at, claim_until) of its claimed
// ones, slot_at the max_in_flight-th latest claim_until among its claims (each NULL when
// there is none); turn is the greatest of the lesser of those two, slot_at, the rate's
// instant (rate_mark − (max(burst,1)−1)·every, rounded up to the microsecond), the pause's
// end while it counts (after last_served) and the stride position, NULL without entries; every claim ends after
// its entry is due; and every entry's user has a row.
func checkReadyAt(t fataler, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) {
	t.Helper()
	ctx := context.Background()
	type claimed struct{ due, until time.Time }
	type user struct {
		free, claimEnd, slot, turn, served, pass *time.Time
		paused                                   *time.Time
		weight, m, burst                         int
		every                                    int64
		mark                                     *string
		entries                                  []claimed
	}
	users := map[string]*user{}
	rows, err := pool.Query(ctx, `SELECT user_id, free_at, claim_end_at, slot_at, turn, last_served, pass, weight, max_in_flight, every, burst, rate_mark::text,
		paused_until FROM rota_users`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		u := &user{}
		if err := rows.Scan(&id, &u.free, &u.claimEnd, &u.slot, &u.turn, &u.served, &u.pass, &u.weight, &u.m, &u.every, &u.burst, &u.mark, &u.paused); err != nil {
			t.Fatal(err)
		}
		users[id] = u
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT user_id, due_at, claim_until FROM rota_due`)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for rows.Next() {
		var id string
		var due time.Time
		var until *time.Time
		if err := rows.Scan(&id, &due, &until); err != nil {
			t.Fatal(err)
		}
		u := users[id]
		if u == nil {
			bad = append(bad, id+": entries and no row")
			users[id] = &user{}
			u = users[id]
		}
		c := claimed{due: due}
		if until != nil {
			c.until = *until
			if !until.After(due) {
				bad = append(bad, fmt.Sprintf("%s: a claim until %v of an entry due at %v", id, until, due))
			}
		}
		u.entries = append(u.entries, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	later := func(a, b *time.Time) *time.Time {
		if a == nil || (b != nil && b.After(*a)) {
			return b
		}
		return a
	}
	earlier := func(a, b *time.Time) *time.Time {
		if a == nil || (b != nil && b.Before(*a)) {
			return b
		}
		return a
	}
	show := func(t *time.Time) string {
		if t == nil {
			return "NULL"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	for id, u := range users {
		var free, claimEnd, slot, turn *time.Time
		var ends []time.Time
		for _, e := range u.entries {
			if e.until.IsZero() {
				free = earlier(free, &e.due)
				continue
			}
			end := e.due
			if e.until.After(end) {
				end = e.until
			}
			claimEnd = earlier(claimEnd, &end)
			ends = append(ends, e.until)
		}
		if u.m > 0 && len(ends) >= u.m {
			slices.SortFunc(ends, func(a, b time.Time) int { return b.Compare(a) })
			slot = &ends[u.m-1]
		}
		if len(u.entries) > 0 {
			turn = later(earlier(free, claimEnd), slot)
			turn = later(turn, rateInstant(t, u.mark, u.every, u.burst))
			turn = later(turn, u.pass)
			if u.paused != nil && (u.served == nil || u.paused.After(*u.served)) {
				turn = later(turn, u.paused)
			}
		}
		for _, col := range []struct {
			name      string
			got, want *time.Time
		}{{"free_at", u.free, free}, {"claim_end_at", u.claimEnd, claimEnd}, {"slot_at", u.slot, slot}, {"turn", u.turn, turn}} {
			if (col.got == nil) != (col.want == nil) || (col.got != nil && !col.got.Equal(*col.want)) {
				bad = append(bad, fmt.Sprintf("%s: %s %s, want %s", id, col.name, show(col.got), show(col.want)))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Fatalf("rota_users' ReadyAt is not exact (%d users): %v", len(users), bad)
	}
}

// rateInstant is the rate's part of a user's ReadyAt, from its stored rate mark
// (nanoseconds since the Unix epoch): mark − (max(burst,1)−1)·every, rounded up to the
// microsecond and kept within duework's time range; nil without a rate or a mark.
func rateInstant(t fataler, mark *string, every int64, burst int) *time.Time {
	if every <= 0 || mark == nil {
		return nil
	}
	r, ok := new(big.Int).SetString(*mark, 10)
	if !ok {
		t.Fatalf("rate mark %q is not an integer", *mark)
	}
	x := r.Sub(r, new(big.Int).Mul(big.NewInt(int64(max(burst, 1)-1)), big.NewInt(every)))
	ns := func(tm time.Time) *big.Int {
		v := new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
		return v.Add(v, big.NewInt(int64(tm.Nanosecond())))
	}
	if x.Cmp(ns(vocab.MinTime)) < 0 {
		return nil
	}
	last := vocab.MaxTime.Truncate(time.Microsecond)
	if x.Cmp(ns(last)) > 0 {
		return &last
	}
	us, rem := new(big.Int).QuoRem(x, big.NewInt(1000), new(big.Int))
	if rem.Sign() > 0 {
		us.Add(us, big.NewInt(1))
	}
	at := time.UnixMicro(us.Int64()).UTC()
	return &at
}
