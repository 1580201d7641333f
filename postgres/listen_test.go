package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// listening is a ListenDue running until the test ends: its wakes, the backend pid of
// each of its LISTENs, and its result.
type listening struct {
	woke <-chan struct{}
	pids <-chan uint32
	done <-chan error
}

// listenDue runs idx.ListenDue until the test ends.
func listenDue(t *testing.T, idx *postgres.Index) listening {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, p, d := make(chan struct{}, 100), make(chan uint32, 100), make(chan error, 1)
	go func() {
		d <- postgres.ListenDueHook(idx, ctx, func() { w <- struct{}{} }, func(pid uint32) { p <- pid })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-d; err != nil {
			t.Errorf("ListenDue returned %v when its ctx ended; want nil", err)
		}
	})
	return listening{woke: w, pids: p, done: d}
}

// awaitOn waits for a value from ch, or fails the test after 10 s.
func awaitOn[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing within 10 s: %s", what)
		panic("unreachable")
	}
}

// An entry scheduled due now on one replica wakes the listener of another, each on a pool
// of its own: Schedule and ScheduleMissing notify once per call when an entry they write
// is due by the server's now, and never for an entry due later or one ScheduleMissing
// leaves as it is. The notifications are read here on a connection of the test's own, with
// a marker sent after each call, so that "no notification" is seen without waiting.
func TestListenDueWakesOtherReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	a, b := pgtest.PoolIn(t, schema, 2), pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, a); err != nil {
		t.Fatal(err)
	}
	listener, writer := postgres.NewIndex(a), postgres.NewIndex(b)
	l := listenDue(t, listener)
	awaitOn(t, l.pids, "ListenDue's LISTEN")

	raw, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	channel := pgx.Identifier{"rota_due." + schema}.Sanitize()
	if _, err := raw.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	// notifications returns the payloads the raw connection receives up to the next marker.
	marker := 0
	notifications := func() []string {
		t.Helper()
		marker++
		if _, err := b.Exec(ctx, "SELECT pg_notify($1, $2)", "rota_due."+schema, fmt.Sprint("marker", marker)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := raw.WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if n.Payload == fmt.Sprint("marker", marker) {
				return got
			}
			got = append(got, n.Payload)
		}
	}
	amy := mustTC(t, "amy")
	now := time.Now()
	later := func(k string) duework.Entry {
		return duework.Entry{UserID: "amy", WorkKey: k, DueAt: now.Add(time.Hour)}
	}
	due := func(k string) duework.Entry {
		return duework.Entry{UserID: "amy", WorkKey: k, DueAt: now.Add(-time.Second)}
	}

	if err := writer.Schedule(ctx, amy, later("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ScheduleMissing(ctx, amy, []duework.Entry{later("b"), later("c")}); err != nil {
		t.Fatal(err)
	}
	if got := notifications(); len(got) != 0 {
		t.Fatalf("Schedule and ScheduleMissing of entries due in an hour notified %q; want nothing", got)
	}
	if err := writer.Schedule(ctx, amy, due("d")); err != nil {
		t.Fatal(err)
	}
	awaitOn(t, l.woke, "a wake after a Schedule due now on another pool")
	if got := notifications(); len(got) != 1 {
		t.Fatalf("a Schedule due now notified %q; want one notification", got)
	}
	// ScheduleMissing of three entries due now, one of which it leaves as it is: one
	// notification for the call.
	if _, err := writer.ScheduleMissing(ctx, amy, []duework.Entry{due("d"), due("e"), due("f"), later("g")}); err != nil {
		t.Fatal(err)
	}
	awaitOn(t, l.woke, "a wake after a ScheduleMissing due now on another pool")
	if got := notifications(); len(got) != 1 {
		t.Fatalf("a ScheduleMissing of entries due now notified %q; want one notification", got)
	}
	// Entries that are there already are left as they are, and notify nothing.
	if n, err := writer.ScheduleMissing(ctx, amy, []duework.Entry{due("d"), due("e")}); err != nil || n != 0 {
		t.Fatalf("ScheduleMissing of entries it has = %d, %v", n, err)
	}
	if got := notifications(); len(got) != 0 {
		t.Fatalf("a ScheduleMissing that wrote nothing notified %q; want nothing", got)
	}
}

// ListenDue survives a dropped connection: when the server ends its backend it
// reconnects, wakes once (notifications sent meanwhile are lost), and wakes again for
// the next entry due now.
func TestListenDueReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	a, b := pgtest.PoolIn(t, schema, 2), pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, a); err != nil {
		t.Fatal(err)
	}
	l := listenDue(t, postgres.NewIndex(a))
	pid := awaitOn(t, l.pids, "ListenDue's LISTEN")
	if _, err := b.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if again := awaitOn(t, l.pids, "a LISTEN after the backend ended"); again == pid {
		t.Fatalf("ListenDue listens again on backend %d, the one that ended", again)
	}
	awaitOn(t, l.woke, "the wake after the reconnection")
	if err := postgres.NewIndex(b).Schedule(ctx, mustTC(t, "amy"), duework.Entry{UserID: "amy", WorkKey: "a", DueAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	awaitOn(t, l.woke, "a wake after a Schedule due now after the reconnection")
	select {
	case err := <-l.done:
		t.Fatalf("ListenDue returned %v after a dropped connection; want it to go on", err)
	default:
	}
}

// ListenDue that cannot listen when it starts returns the error at once.
func TestListenDueFailsAtOnceWithoutAServer(t *testing.T) {
	t.Parallel()
	pgtest.RequireServer(t)
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = postgres.NewIndex(pool).ListenDue(context.Background(), func() { t.Error("wake without a server") })
	if err == nil {
		t.Fatal("ListenDue without a server = nil; want the connection's error")
	}
}
