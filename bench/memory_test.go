package bench

import (
	"container/heap"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// t0 is the start of every simulated clock.
var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// round is the interval by which each round of the in-memory drain advances the clock: every
// key is due once per round. It is above the workqueue's 10 s heartbeat, which the
// workqueue harness relies on (see wqHarness.round).
const round = time.Hour

// smoke reports whether the benchmarks run once each (-benchtime=1x), as CI runs them.
func smoke() bool {
	f := flag.Lookup("test.benchtime")
	return f != nil && f.Value.String() == "1x"
}

// drainWork is the in-memory work: n keys, key i due at offsets[i] after the start of every
// round, spread over (0, round]; key i belongs to user i mod users.
type drainWork struct {
	n, users int
	offsets  []time.Duration
}

func newDrainWork(n, users int, seed uint64) drainWork {
	rng := rand.New(rand.NewPCG(seed, 0))
	w := drainWork{n: n, users: users, offsets: make([]time.Duration, n)}
	for i := range w.offsets {
		w.offsets[i] = 1 + time.Duration(rng.Int64N(int64(round)))
	}
	return w
}

// drainer is one harness: each call to round advances its clock by one round, takes every
// due key, marks it done and reschedules it at its offset in the next round, and returns how
// many keys it took. visit, when not nil, sees each key as it is taken.
type drainer interface {
	round(visit func(key int)) (int, error)
	close()
}

// rotaHarness runs the work on duework.Memory and a dispatch.Dispatcher: one lane whose
// cycles take up to rotaBatch keys, at most rotaPerUser per user; a round dispatches at the
// round's now until a cycle hands out nothing, and completes the items as the bridge's
// Runner does: one Index.CompleteMany per 100 completions, and one
// for the rest at the end of each cycle.
type rotaHarness struct {
	w    drainWork
	idx  *duework.Memory
	d    *dispatch.Dispatcher
	tcs  []tenancy.Context
	now  time.Time
	done []duework.Done // completions waiting for their batch
}

const (
	rotaBatch   = 1000
	rotaPerUser = 1
)

func newRotaHarness(w drainWork) (*rotaHarness, error) {
	h := &rotaHarness{w: w, idx: duework.NewMemory(), now: t0, tcs: make([]tenancy.Context, w.users),
		done: make([]duework.Done, 0, 100)}
	for u := range h.tcs {
		tc, err := tenancy.NewContext(fmt.Sprintf("user%05d", u))
		if err != nil {
			return nil, err
		}
		h.tcs[u] = tc
	}
	d, err := dispatch.New(h.idx, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: rotaPerUser, PerCycleLimit: rotaBatch}},
		GlobalBatchLimit: rotaBatch,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         time.Minute,
	})
	if err != nil {
		return nil, err
	}
	h.d = d
	ctx := context.Background()
	for i := range w.n {
		u := i % w.users
		e := duework.Entry{UserID: h.tcs[u].UserID(), WorkKey: "k" + strconv.Itoa(i), Tier: "t", DueAt: t0.Add(w.offsets[i])}
		if err := h.idx.Schedule(ctx, h.tcs[u], e); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *rotaHarness) round(visit func(int)) (int, error) {
	ctx := context.Background()
	h.now = h.now.Add(round)
	taken := 0
	for {
		b, err := h.d.Dispatch(ctx, h.now)
		if err != nil {
			return taken, err
		}
		if len(b.Items) == 0 {
			return taken, nil
		}
		for _, it := range b.Items {
			e := it.Claim.Entry
			i, err := strconv.Atoi(e.WorkKey[1:])
			if err != nil {
				return taken, err
			}
			if visit != nil {
				visit(i)
			}
			next := e
			next.LastRunAt = h.now
			next.DueAt = h.now.Add(h.w.offsets[i])
			h.done = append(h.done, duework.Done{Tenant: h.tcs[i%h.w.users], Claim: it.Claim, Next: next})
			if len(h.done) == cap(h.done) {
				if err := h.flush(ctx); err != nil {
					return taken, err
				}
			}
			taken++
		}
		if err := h.flush(ctx); err != nil {
			return taken, err
		}
	}
}

// flush writes the waiting completions in one Index.CompleteMany.
func (h *rotaHarness) flush(ctx context.Context) error {
	if len(h.done) == 0 {
		return nil
	}
	errs, err := h.idx.CompleteMany(ctx, h.done)
	if err == nil {
		err = errors.Join(errs...)
	}
	clear(h.done)
	h.done = h.done[:0]
	return err
}

func (h *rotaHarness) close() {}

// wqHarness runs the work on client-go's typed delaying workqueue driven by a fake clock
// (k8s.io/utils/clock/testing), so that its delays are the same virtual due times and not
// wall-clock waits: each key is added with AddAfter(key, its offset); a round steps the
// clock by one round and Gets every key (all n are due), marking each Done and adding it
// again with AddAfter for the next round — what a controller that requeues with a delay
// does. Every delay goes through the queue's real path: AddAfter's channel, the waiting
// loop's heap, and the FIFO that Get reads.
type wqHarness struct {
	w     drainWork
	clock *clocktesting.FakeClock
	q     workqueue.TypedDelayingInterface[int]
}

func newWQHarness(w drainWork) *wqHarness {
	c := clocktesting.NewFakeClock(t0)
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[int]{Clock: c})
	for i := range w.n {
		q.AddAfter(i, w.offsets[i])
	}
	return &wqHarness{w: w, clock: c, q: q}
}

// round steps the fake clock by one round. That is more than the queue's heartbeat (10 s),
// so the step always leaves a heartbeat tick pending: the waiting loop runs at least once
// after the step, sees the new time and moves every due key to the FIFO, even if it was
// busy when the clock moved. Get blocks until it has.
func (h *wqHarness) round(visit func(int)) (int, error) {
	h.clock.Step(round)
	for range h.w.n {
		i, shutdown := h.q.Get()
		if shutdown {
			return 0, fmt.Errorf("workqueue shut down")
		}
		if visit != nil {
			visit(i)
		}
		h.q.Done(i)
		h.q.AddAfter(i, h.w.offsets[i])
	}
	return h.w.n, nil
}

func (h *wqHarness) close() { h.q.ShutDown() }

// heapHarness is the floor: the least that a round needs, on container/heap and no more —
// a heap of keys by due time; a round pops every key that is due and pushes it back at its
// offset in the next round. No tenants, no claims, no completions.
type heapHarness struct {
	w   drainWork
	h   dueKeys
	now time.Time
}

// dueKey is one key of heapHarness's heap, with its due time.
type dueKey struct {
	due time.Time
	key int
}

// dueKeys is a container/heap.Interface: a min-heap of keys by due time.
type dueKeys []dueKey

func (h dueKeys) Len() int           { return len(h) }
func (h dueKeys) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueKeys) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueKeys) Push(x any)        { *h = append(*h, x.(dueKey)) }
func (h *dueKeys) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newHeapHarness(w drainWork) *heapHarness {
	h := &heapHarness{w: w, h: make(dueKeys, w.n), now: t0}
	for i := range w.n {
		h.h[i] = dueKey{due: t0.Add(w.offsets[i]), key: i}
	}
	heap.Init(&h.h)
	return h
}

// round pops every due key and pushes it back at its offset in the next round; a key
// pushed back is due after now, so the round takes each key once.
func (h *heapHarness) round(visit func(int)) (int, error) {
	h.now = h.now.Add(round)
	taken := 0
	for len(h.h) > 0 && !h.h[0].due.After(h.now) {
		k := heap.Pop(&h.h).(dueKey)
		if visit != nil {
			visit(k.key)
		}
		heap.Push(&h.h, dueKey{due: h.now.Add(h.w.offsets[k.key]), key: k.key})
		taken++
	}
	return taken, nil
}

func (h *heapHarness) close() {}

// drainUsers is how many tenants the in-memory work is spread over.
const drainUsers = 1000

// BenchmarkDrain compares the harnesses — rota, the workqueue and the container/heap
// floor — on the same work: n keys with due times spread over a round, one op = one round
// = every key taken, marked done and rescheduled, after one untimed round. keys/s,
// ns/key, allocs/key and B/key are per key (each key is one dispatched item); allocs/op
// and B/op are per round.
//
// n = 1,000,000 takes tens of seconds per op (and its fixture several more), so the smoke run
// (-benchtime=1x, as CI runs every benchmark once) stops at 100,000: the same code, bounded.
func BenchmarkDrain(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if smoke() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		w := newDrainWork(n, drainUsers, 1)
		for _, name := range []string{"rota", "workqueue", "heap"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, name), func(b *testing.B) {
				var d drainer
				switch name {
				case "rota":
					h, err := newRotaHarness(w)
					if err != nil {
						b.Fatal(err)
					}
					d = h
				case "workqueue":
					d = newWQHarness(w)
				default:
					d = newHeapHarness(w)
				}
				defer d.close()
				// One round, untimed, first, as BenchmarkDrainPaired does.
				if got, err := d.round(nil); err != nil || got != n {
					b.Fatalf("round: took %d of %d keys, %v", got, n, err)
				}
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					got, err := d.round(nil)
					if err != nil || got != n {
						b.Fatalf("round: took %d of %d keys, %v", got, n, err)
					}
				}
				runtime.ReadMemStats(&after)
				keys := float64(b.N) * float64(n)
				b.ReportMetric(keys/b.Elapsed().Seconds(), "keys/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/keys, "ns/key")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/keys, "allocs/key")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/keys, "B/key")
			})
		}
	}
}

// BenchmarkDrainPaired runs one round of each harness back to back in every op, on the same
// work, and reports each one's ns/key and rota's ratio to the workqueue and to the heap. The machine's load changes slowly
// next to one op, so the ratio holds even when the absolute figures of BenchmarkDrain swing
// with what else runs. Same sizes and smoke bound as BenchmarkDrain.
func BenchmarkDrainPaired(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if smoke() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			w := newDrainWork(n, drainUsers, 1)
			rh, err := newRotaHarness(w)
			if err != nil {
				b.Fatal(err)
			}
			wh := newWQHarness(w)
			defer wh.close()
			hh := newHeapHarness(w)
			var rota, wq, hp time.Duration
			sides := []struct {
				d   drainer
				sum *time.Duration
			}{{rh, &rota}, {wh, &wq}, {hh, &hp}}
			// One round of each, untimed, first: the figures are the steady state's, not
			// the first round's, which grows each side's working memory.
			for _, h := range sides {
				if got, err := h.d.round(nil); err != nil || got != n {
					b.Fatalf("round: took %d of %d keys, %v", got, n, err)
				}
			}
			for b.Loop() {
				for _, h := range sides {
					start := time.Now()
					got, err := h.d.round(nil)
					*h.sum += time.Since(start)
					if err != nil || got != n {
						b.Fatalf("round: took %d of %d keys, %v", got, n, err)
					}
				}
			}
			keys := float64(b.N) * float64(n)
			b.ReportMetric(float64(rota.Nanoseconds())/keys, "rota-ns/key")
			b.ReportMetric(float64(wq.Nanoseconds())/keys, "workqueue-ns/key")
			b.ReportMetric(float64(hp.Nanoseconds())/keys, "heap-ns/key")
			b.ReportMetric(rota.Seconds()/wq.Seconds(), "rota/workqueue")
			b.ReportMetric(rota.Seconds()/hp.Seconds(), "rota/heap")
		})
	}
}

// Every harness takes exactly every key once per round — the same set — so BenchmarkDrain
// compares the same work.
func TestHarnessesDrainTheSameKeys(t *testing.T) {
	w := newDrainWork(3000, 70, 2)
	rh, err := newRotaHarness(w)
	if err != nil {
		t.Fatal(err)
	}
	wh := newWQHarness(w)
	defer wh.close()
	hh := newHeapHarness(w)
	all := make([]int, w.n)
	for i := range all {
		all[i] = i
	}
	for r := range 3 {
		for _, h := range []struct {
			name string
			d    drainer
		}{{"rota", rh}, {"workqueue", wh}, {"heap", hh}} {
			var took []int
			if _, err := h.d.round(func(i int) { took = append(took, i) }); err != nil {
				t.Fatal(err)
			}
			slices.Sort(took)
			if !slices.Equal(took, all) {
				t.Errorf("round %d: %s took %d keys, not each of the %d once", r, h.name, len(took), w.n)
			}
		}
	}
}

// The workqueue hands keys out in due order and rota in its fair order, but within one
// user rota keeps due order too: each user's keys come out in the order of their offsets.
func TestRotaKeepsDueOrderWithinAUser(t *testing.T) {
	w := newDrainWork(500, 7, 3)
	rh, err := newRotaHarness(w)
	if err != nil {
		t.Fatal(err)
	}
	last := map[int]time.Duration{}
	if _, err := rh.round(func(i int) {
		u := i % w.users
		if prev, ok := last[u]; ok && w.offsets[i] < prev {
			t.Errorf("user %d: key %d (offset %v) after a key due at %v", u, i, w.offsets[i], prev)
		}
		last[u] = w.offsets[i]
	}); err != nil {
		t.Fatal(err)
	}
}
