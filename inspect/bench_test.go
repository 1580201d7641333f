package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/inspect"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

// benchPages are the pages BenchmarkInspectorPages times, as an operator opens them.
var benchPages = []struct{ name, path string }{
	{"overview", "/"},
	{"lane", "/lanes/free"},
	{"tenant", "/tenants/user-7"},
	{"maintenance", "/maintenance"},
	{"paused", "/paused"},
}

// benchFixture is an Inspector over a memory index of n users, every one of them ready
// in one of two lanes but the first 60 and one in a hundred after them, which are paused,
// with a full ring of reports (naming 60 failing sources) and a few maintenance tasks.
type benchFixture struct {
	insp *inspect.Inspector
}

// newBenchFixture builds the n-user fixture; a million users take a few seconds.
func newBenchFixture(b *testing.B, n int) *benchFixture {
	b.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	lanes := []dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 5, PerCycleLimit: 500}, {Lane: "free", PerUserLimit: 1, PerCycleLimit: 500}}
	routes := make([]duework.Route, 0, 10_000)
	for u := range n {
		id := "user-" + strconv.Itoa(u)
		tc, err := tenancy.NewContext(id)
		if err != nil {
			b.Fatal(err)
		}
		entries := 1
		if u == 7 {
			entries = 200 // the tenant page's user: more entries than a page shows
		}
		for k := range entries {
			e := duework.Entry{UserID: id, WorkKey: "feed-" + strconv.Itoa(k), Tier: "hot", DueAt: now.Add(-time.Duration(u%3600+1) * time.Second)}
			if err := idx.Schedule(ctx, tc, e); err != nil {
				b.Fatal(err)
			}
		}
		if u < 60 || u%100 == 50 {
			if err := idx.Pause(ctx, tc, now.Add(time.Hour), "upstream-429"); err != nil {
				b.Fatal(err)
			}
		}
		routes = append(routes, duework.Route{UserID: id, Group: string(lanes[u%2].Lane)})
		if len(routes) == cap(routes) || u == n-1 {
			if err := idx.Route(ctx, routes); err != nil {
				b.Fatal(err)
			}
			routes = routes[:0]
		}
	}
	store := maintenance.NewMemoryStateStore()
	for k := range 8 {
		st := maintenance.TaskState{Name: "task-" + strconv.Itoa(k), LastRunAt: now.Add(-time.Hour), DeferredSince: now.Add(-time.Duration(k) * time.Minute), DeferReason: maintenance.ReasonOutranked}
		if err := store.Save(ctx, 1, st); err != nil {
			b.Fatal(err)
		}
	}
	insp, err := inspect.New(inspect.Config{Index: idx, Lanes: lanes, StateStore: store, Clock: fixedClock(now), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for c := range 60 {
		at := now.Add(time.Duration(c-60) * time.Second)
		var lrs []dispatch.LaneReport
		for _, lc := range lanes {
			lrs = append(lrs, dispatch.LaneReport{Lane: lc.Lane, Users: 500, Dispatched: 500, Shed: 20, WaitingSince: at.Add(-time.Minute), OldestDue: at.Add(-time.Hour)})
		}
		e := duework.Entry{UserID: "user-" + strconv.Itoa(c), WorkKey: "feed-0", Tier: "hot", DueAt: at, ErrorStreak: 5}
		next := e
		next.ErrorStreak, next.LastRunAt, next.DueAt = 6, at, at.Add(time.Hour)
		failing := bridge.ItemReport{Item: dispatch.Item{Lane: "free", Claim: duework.Claim{Entry: e}}, Status: bridge.StatusError,
			Written: true, Next: next, Err: errors.New("upstream said 401")}
		insp.ObserveCycle(bridge.CycleReport{Now: at, Dispatched: 1000, Errors: 1, Lanes: lrs, Items: []bridge.ItemReport{failing}})
	}
	runtime.GC() // so that the build's garbage is not collected while a page is timed
	return &benchFixture{insp: insp}
}

// serve GETs path from the fixture's Inspector, as a browser does.
func (f *benchFixture) serve(b *testing.B, path string) {
	rec := httptest.NewRecorder()
	f.insp.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s = %d: %s", path, rec.Code, rec.Body)
	}
}

// BenchmarkInspectorPages times each page at 1,000 and at 1,000,000 users, of whom the
// first 60 and one in a hundred after them are paused (the paused page shows 50 at both
// sizes). On the
// million-user line, million/thousand is that page's time over its time at a thousand
// users, both timed in the same loop, one request of each size after the other, so that
// the machine's load weighs on both alike: a page that costs what it shows stays near 1.
func BenchmarkInspectorPages(b *testing.B) {
	const thousand, million = 1_000, 1_000_000
	fixtures := map[int]*benchFixture{}
	fixture := func(b *testing.B, n int) *benchFixture {
		if fixtures[n] == nil {
			fixtures[n] = newBenchFixture(b, n)
		}
		return fixtures[n]
	}
	for _, p := range benchPages {
		b.Run(p.name, func(b *testing.B) {
			b.Run(fmt.Sprintf("users=%d", thousand), func(b *testing.B) {
				f := fixture(b, thousand)
				b.ReportAllocs()
				for b.Loop() {
					f.serve(b, p.path)
				}
			})
			b.Run(fmt.Sprintf("users=%d", million), func(b *testing.B) {
				small, big := fixture(b, thousand), fixture(b, million)
				small.serve(b, p.path) // warm both, so that a one-iteration run compares like with like
				big.serve(b, p.path)
				b.ReportAllocs()
				var tSmall, tBig time.Duration
				for b.Loop() {
					b.StopTimer()
					start := time.Now()
					small.serve(b, p.path)
					tSmall += time.Since(start)
					b.StartTimer()
					start = time.Now()
					big.serve(b, p.path)
					tBig += time.Since(start)
				}
				b.ReportMetric(float64(tBig)/float64(max(tSmall, 1)), "million/thousand")
			})
		})
	}
}
