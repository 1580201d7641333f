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

func dueBefore(i int) time.Time { return t0.Add(-time.Duration(i+1) * time.Microsecond) }
func dueLater(i int) time.Time  { return t0.Add(time.Hour + time.Duration(i)*time.Microsecond) }

// BenchmarkDueHeadsNoisyNeighbour measures DueHeads(now, 2) with one user holding N due
// entries and 10,000 others holding one each. Both cases store 1,010,000 entries (the
// N = 1,000 case adds 999,000 not-yet-due entries to the noisy user) and both fixtures are
// live during both measurements, so the live heap is the same: the figures compare the
// index's work, not the garbage collector's. The bar: N = 1e6 costs at most 1.5×
// N = 1e3; the paired sub-benchmark measures that ratio directly.
func BenchmarkDueHeadsNoisyNeighbour(b *testing.B) {
	const others, total = 10_000, 1_000_000
	fixtures := map[int]*fixture{}
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
		f.add(b, "user", others, 1, dueBefore)
		f.keys = nil
		fixtures[n] = f
	}
	runtime.GC()
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			x := fixtures[n].x
			b.ReportAllocs()
			var heads []duework.Head
			runtime.GC()
			cpu := cpuTime()
			for b.Loop() {
				var err error
				if heads, err = x.DueHeads(bctx, t0, 2); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			if len(heads) != others+1 || !heads[0].More {
				b.Fatalf("got %d heads, want %d with the noisy one's More set", len(heads), others+1)
			}
		})
	}
	// The two sizes again, interleaved call by call (in alternating order), so that a busy
	// machine and the garbage collector weigh on both alike: the ratio to read.
	b.Run("paired", func(b *testing.B) {
		small, big := fixtures[1_000].x, fixtures[1_000_000].x
		var tSmall, tBig time.Duration
		call := func(x *duework.Memory, into *time.Duration) {
			start := time.Now()
			if _, err := x.DueHeads(bctx, t0, 2); err != nil {
				b.Fatal(err)
			}
			*into += time.Since(start)
		}
		runtime.GC()
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				call(small, &tSmall)
				call(big, &tBig)
			} else {
				call(big, &tBig)
				call(small, &tSmall)
			}
			i++
		}
		b.ReportMetric(float64(tSmall)/float64(b.N), "N=1e3-ns/call")
		b.ReportMetric(float64(tBig)/float64(b.N), "N=1e6-ns/call")
		b.ReportMetric(float64(tBig)/float64(tSmall), "ratio")
	})
	runtime.KeepAlive(fixtures)
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

// BenchmarkMemoryPerEntry reports the heap bytes per stored entry, excluding the bytes of
// the ID strings (which the index shares with the caller and which are allocated before the
// first reading). The shape is a million entries, here over 10,000 users; the other
// is the worst case for the index, every user holding one entry, where the user's own record
// and map slot add to it (measured at 100,000 entries to keep a smoke run short: the figure
// per entry does not depend on the count).
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
				b.ReportMetric(float64(after-before)/float64(total), "bytes/entry")
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
