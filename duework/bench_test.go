package duework_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// The benchmarks build their fixtures inside the benchmark functions, never at init, so
// that a -benchtime=1x smoke run costs one build of each.

var bctx = context.Background()

// fixture is an index plus what the benchmarks need to address its entries.
type fixture struct {
	x    *duework.Memory
	tcs  map[string]tenancy.Context
	keys []duework.Key
}

// add schedules, for each of users users, perUser entries whose DueAt comes from due(i),
// i counting entries of that user from 0.
func (f *fixture) add(b *testing.B, prefix string, users, perUser int, due func(i int) time.Time) {
	b.Helper()
	if f.x == nil {
		f.x, f.tcs = duework.NewMemory(), map[string]tenancy.Context{}
	}
	for u := range users {
		id := prefix + strconv.Itoa(u)
		tc, ok := f.tcs[id]
		if !ok {
			var err error
			if tc, err = tenancy.NewContext(id); err != nil {
				b.Fatal(err)
			}
			f.tcs[id] = tc
		}
		for i := range perUser {
			e := duework.Entry{UserID: id, WorkKey: "feed-" + strconv.Itoa(i), Tier: "warm", DueAt: due(i)}
			if err := f.x.Schedule(bctx, tc, e); err != nil {
				b.Fatal(err)
			}
			f.keys = append(f.keys, e.Key())
		}
	}
}

// addPaused adds users users with four entries each, due as the others', and pauses them
// for an hour.
func (f *fixture) addPaused(b *testing.B, users int) {
	b.Helper()
	f.add(b, "paused", users, 4, dueBefore)
	for u := range users {
		if err := f.x.Pause(bctx, f.tcs["paused"+strconv.Itoa(u)], t0.Add(time.Hour), "upstream-429"); err != nil {
			b.Fatal(err)
		}
	}
}

func dueBefore(i int) time.Time { return t0.Add(-time.Duration(i+1) * time.Microsecond) }
func dueLater(i int) time.Time  { return t0.Add(time.Hour + time.Duration(i)*time.Microsecond) }

// readCycle is what one dispatcher lane does with Ready: read up to users users, PerUser 3,
// holding them, then Release them all. ids is reused between calls.
func readCycle(b *testing.B, x *duework.Memory, users int, ids []string) []string {
	const hold = time.Minute
	p, err := x.Ready(bctx, duework.ReadyQuery{Now: t0, Users: users, PerUser: 3, Hold: hold})
	if err != nil || len(p.Heads) != users {
		b.Fatalf("Ready: %d heads, %v; want %d", len(p.Heads), err, users)
	}
	ids = ids[:0]
	for _, h := range p.Heads {
		ids = append(ids, h.UserID)
	}
	if err := x.Release(bctx, ids, t0.Add(hold)); err != nil {
		b.Fatal(err)
	}
	return ids
}

// measureCycles runs the sub-benchmarks name[i] over xs[i], then the same reads
// interleaved call by call (each iteration starting with the next index in turn) as
// "paired", so that a busy machine and the garbage collector weigh on all alike: the
// ratios to read, reported as units[i-1], are the time of the i-th over the first's. Every
// fixture is built before and live during every measurement, so the live heap is the same
// for all.
func measureCycles(b *testing.B, names []string, xs []*duework.Memory, users int, units ...string) {
	runtime.GC()
	for i, name := range names {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ids := make([]string, 0, users)
			runtime.GC()
			cpu := cpuTime()
			for b.Loop() {
				ids = readCycle(b, xs[i], users, ids)
			}
			reportCPU(b, cpu)
		})
	}
	b.Run("paired", func(b *testing.B) {
		ids := make([]string, 0, users)
		spent := make([]time.Duration, len(xs))
		call := func(i int) {
			start := time.Now()
			ids = readCycle(b, xs[i], users, ids)
			spent[i] += time.Since(start)
		}
		runtime.GC()
		i := 0
		for b.Loop() {
			for j := range xs {
				call((i + j) % len(xs))
			}
			i++
		}
		for i, name := range names {
			b.ReportMetric(float64(spent[i])/float64(b.N), name+"-ns/call")
		}
		for i, unit := range units {
			b.ReportMetric(float64(spent[i+1])/float64(spent[0]), unit)
		}
	})
	runtime.KeepAlive(xs)
}

// BenchmarkReady measures one lane's read: Ready of 1,000 users, PerUser 3, with a hold,
// then Release of them all, with 1,000 and with 1,000,000 users ready, each with three
// due entries. The bar: 1e6 costs at most 2× 1e3.
func BenchmarkReady(b *testing.B) {
	small, big := &fixture{}, &fixture{}
	small.add(b, "user", 1_000, 3, dueBefore)
	big.add(b, "user", 1_000_000, 3, dueBefore)
	small.keys, big.keys = nil, nil
	measureCycles(b, []string{"users=1e3", "users=1e6"}, []*duework.Memory{small.x, big.x}, 1_000, "ratio")
}

// BenchmarkReadyNoisyNeighbour measures the same read with 10,000 users ready, one entry
// each, behind one user first in turn order holding N due entries. Both cases store
// 1,010,000 entries (the N = 1,000 case adds 999,000 not-yet-due entries to the noisy
// user). The bar: N = 1e6 costs at most 1.5× N = 1e3.
func BenchmarkReadyNoisyNeighbour(b *testing.B) {
	const others, total = 10_000, 1_000_000
	var xs []*duework.Memory
	for _, n := range []int{1_000, 1_000_000} {
		f := &fixture{}
		f.add(b, "noisy", 1, n, dueBefore)
		if n < total {
			tc := f.tcs["noisy0"]
			for i := n; i < total; i++ {
				e := duework.Entry{UserID: "noisy0", WorkKey: "feed-" + strconv.Itoa(i), Tier: "warm", DueAt: dueLater(i)}
				if err := f.x.Schedule(bctx, tc, e); err != nil {
					b.Fatal(err)
				}
			}
		}
		f.add(b, "user", others, 1, func(int) time.Time { return t0 })
		xs = append(xs, f.x)
	}
	measureCycles(b, []string{"N=1e3", "N=1e6"}, xs, 1_000, "ratio")
}

// BenchmarkReadyWithLimits measures the same read, Ready of 1,000 users with 100,000
// ready, when every user has limits — MaxInFlight 4, Every 1s, Burst 5, Weight 2 — and
// when as many users again are paused, their entries due as early, against the same users
// without limits or pauses, paired in one run: limits/none and paused/none are the ratios
// of their times. Each user has four due entries, one of them claimed and in flight, so
// that the in-flight count and the rate mark are real work; the limits leave each head the
// same three entries either way.
func BenchmarkReadyWithLimits(b *testing.B) {
	const users = 100_000
	limits := duework.Limits{MaxInFlight: 4, Every: time.Second, Burst: 5, Weight: 2}
	var xs []*duework.Memory
	for i, l := range []duework.Limits{{}, limits, {}} {
		f := &fixture{}
		f.add(b, "user", users, 4, dueBefore)
		if i == 2 {
			f.addPaused(b, users)
		}
		routes := make([]duework.Route, 0, users)
		first := make([]duework.Key, 0, users)
		for u := range users {
			id := "user" + strconv.Itoa(u)
			routes = append(routes, duework.Route{UserID: id, Limits: l})
			first = append(first, duework.Key{UserID: id, WorkKey: "feed-0"})
		}
		if err := f.x.Route(bctx, routes); err != nil {
			b.Fatal(err)
		}
		for len(first) > 0 {
			n := min(1_000, len(first))
			if cs, err := f.x.Claim(bctx, first[:n], t0, t0.Add(time.Hour)); err != nil || len(cs) != n {
				b.Fatalf("Claim: %d claims, %v", len(cs), err)
			}
			first = first[n:]
		}
		xs = append(xs, f.x)
	}
	p, err := xs[1].Ready(bctx, duework.ReadyQuery{Now: t0, Users: 1, PerUser: 3})
	if err != nil || len(p.Heads) != 1 || len(p.Heads[0].Due) != 3 || p.Heads[0].InFlight != 1 || p.Heads[0].Limits != limits {
		b.Fatalf("a limited head = %+v, %v; want three Due and one in flight", p.Heads, err)
	}
	measureCycles(b, []string{"none", "limits", "paused"}, xs, 1_000, "limits/none", "paused/none")
}

// BenchmarkDueBefore measures DueBefore(now, 100) over 1,000 users with 100 due entries
// each.
func BenchmarkDueBefore(b *testing.B) {
	f := &fixture{}
	f.add(b, "user", 1_000, 100, dueBefore)
	b.ReportAllocs()
	runtime.GC()
	cpu := cpuTime()
	for b.Loop() {
		es, err := f.x.DueBefore(bctx, t0, 100)
		if err != nil || len(es) != 100 {
			b.Fatal(len(es), err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkSchedule measures replacing an entry (the steady state of a watch list) in an
// index of n entries over n/100 users.
func BenchmarkSchedule(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			f := &fixture{}
			f.add(b, "user", n/100, 100, dueBefore)
			b.ReportAllocs()
			i := 0
			runtime.GC()
			cpu := cpuTime()
			for b.Loop() {
				k := f.keys[i%len(f.keys)]
				e := duework.Entry{UserID: k.UserID, WorkKey: k.WorkKey, Tier: "warm", DueAt: t0.Add(time.Duration(i) * time.Microsecond)}
				if err := f.x.Schedule(bctx, f.tcs[k.UserID], e); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkClaimComplete measures one dispatched item's round trip: Claim one due key, then
// Complete it with a DueAt that is due again, in an index of n entries over n/100 users.
func BenchmarkClaimComplete(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			f := &fixture{}
			f.add(b, "user", n/100, 100, dueBefore)
			b.ReportAllocs()
			key := make([]duework.Key, 1)
			i := 0
			runtime.GC()
			cpu := cpuTime()
			for b.Loop() {
				key[0] = f.keys[i%len(f.keys)]
				cs, err := f.x.Claim(bctx, key, t0, t0.Add(time.Minute))
				if err != nil || len(cs) != 1 {
					b.Fatal(cs, err)
				}
				if err := f.x.Complete(bctx, f.tcs[key[0].UserID], cs[0], cs[0].Entry); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkCompleteMany measures completing a batch of 1,000 claimed items in one call, in
// an index of n entries over n/100 users; the claims are made outside the timer.
func BenchmarkCompleteMany(b *testing.B) {
	const batch = 1_000
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			f := &fixture{}
			f.add(b, "user", n/100, 100, dueBefore)
			done := make([]duework.Done, batch)
			b.ReportAllocs()
			i, now := 0, t0
			runtime.GC()
			for b.Loop() {
				b.StopTimer()
				keys := f.keys[i%len(f.keys):][:batch]
				i += batch
				cs, err := f.x.Claim(bctx, keys, now, now.Add(time.Minute))
				if err != nil || len(cs) != batch {
					b.Fatal(len(cs), err)
				}
				for j, c := range cs {
					done[j] = duework.Done{Tenant: f.tcs[c.Entry.UserID], Claim: c, Next: c.Entry}
				}
				b.StartTimer()
				errs, err := f.x.CompleteMany(bctx, done)
				if err != nil || errs[batch-1] != nil {
					b.Fatal(errs[batch-1], err)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N*batch), "ns/item")
		})
	}
}

// BenchmarkMemoryPerEntry reports the heap bytes per stored entry (B/entry), excluding the
// bytes of the ID strings (which the index shares with the caller and which are allocated
// before the first reading). The bar (at most 150) is for a million entries over 10,000
// users; the other shape is the worst case for the index, every user holding one entry,
// where the user's own record and map slot add to it (measured at 100,000 entries to keep
// a smoke run short: the figure per entry does not depend on the count).
func BenchmarkMemoryPerEntry(b *testing.B) {
	for _, shape := range []struct{ users, perUser int }{{10_000, 100}, {100_000, 1}} {
		b.Run(fmt.Sprintf("entries=%d/users=%d", shape.users*shape.perUser, shape.users), func(b *testing.B) {
			users, perUser := shape.users, shape.perUser
			total := users * perUser
			for range b.N {
				// The strings and contexts first: they are the caller's.
				ids := make([]string, users)
				tcs := make([]tenancy.Context, users)
				for u := range ids {
					ids[u] = "user-" + strconv.Itoa(u)
					tcs[u], _ = tenancy.NewContext(ids[u])
				}
				works := make([]string, perUser)
				for i := range works {
					works[i] = "feed-" + strconv.Itoa(i)
				}
				before := heapAlloc()
				x := duework.NewMemory()
				for u, id := range ids {
					for i, w := range works {
						e := duework.Entry{UserID: id, WorkKey: w, Tier: "warm", DueAt: t0.Add(time.Duration(i) * time.Second), LastRunAt: t0}
						if err := x.Schedule(bctx, tcs[u], e); err != nil {
							b.Fatal(err)
						}
					}
				}
				after := heapAlloc()
				b.ReportMetric(float64(after-before)/float64(total), "B/entry")
				runtime.KeepAlive(x)
				runtime.KeepAlive(ids)
				runtime.KeepAlive(works)
			}
		})
	}
}

// cpuTime returns the CPU time this process has used, all threads (the garbage collector's
// included). On a shared machine it is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start, as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
