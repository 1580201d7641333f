package postgres_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// recordingIndex remembers what its Dispatcher read and asked for in each cycle. One
// Dispatcher uses it, one cycle at a time.
type recordingIndex struct {
	duework.Index
	heads []duework.Head
	keys  []duework.Key
}

func (r *recordingIndex) DueHeads(ctx context.Context, now time.Time, perUser int) ([]duework.Head, error) {
	h, err := r.Index.DueHeads(ctx, now, perUser)
	r.heads, r.keys = h, nil
	return h, err
}

func (r *recordingIndex) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	r.keys = slices.Clone(keys)
	return r.Index.Claim(ctx, keys, now, until)
}

type claimRecord struct {
	c   duework.Claim
	now time.Time
}

type completeRecord struct {
	next duework.Entry
	ok   bool
}

func hash(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

const (
	contentionUsers   = 1_000
	contentionEntries = 100_000
	noisyEntries      = 50_050 // user000 holds these; the 999 others hold 50 each
)

var contentionLanes = []dispatch.LaneCapacity{
	{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 120},
	{Lane: "free", PerUserLimit: 2, PerCycleLimit: 200},
}

func contentionLane(user string) dispatch.Lane {
	if hash(user)%5 == 0 {
		return "pro"
	}
	return "free"
}

// Four dispatchers, each with its own pool, dispatch concurrently over 100,000 entries of
// 1,000 tenants while workers complete most items (and abandon some, whose claims must end
// on their own). Afterwards: no entry was handed out twice while a claim on it lasted, none
// was lost, and every cycle was fair — caps held, max-min fairness inside each lane, and
// strict priority between lanes.
func TestContentionFourDispatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_test")
	setup := pgtest.PoolIn(t, schema, 2)
	if err := postgres.Migrate(ctx, setup); err != nil {
		t.Fatal(err)
	}
	users := make([]string, contentionUsers)
	counts := make([]int, contentionUsers)
	for i := range users {
		users[i] = fmt.Sprintf("user%03d", i)
		counts[i] = (contentionEntries - noisyEntries) / (contentionUsers - 1)
	}
	counts[0] = noisyEntries
	pgtest.LoadDue(t, setup, users, counts, func(int) time.Time { return t0 })

	const (
		dispatchers = 4
		cycles      = 25
		claimFor    = 20 * time.Second
	)
	var clock atomic.Int64 // logical seconds after base; each Dispatch advances it by one
	base := t0.Add(time.Hour)
	at := func(s int64) time.Time { return base.Add(time.Duration(s) * time.Second) }

	var (
		mu        sync.Mutex
		claims    []claimRecord
		completes = map[uint64]completeRecord{} // by claim token
		batches   []dispatch.Batch
		cycleLog  []*recordingIndex // one snapshot per cycle
	)
	laneFor := func(_ context.Context, user string) (dispatch.Lane, error) { return contentionLane(user), nil }

	var wg sync.WaitGroup
	for range dispatchers {
		pool := pgtest.PoolIn(t, schema, 4)
		idx := postgres.NewIndex(pool)
		rec := &recordingIndex{Index: idx}
		disp, err := dispatch.New(rec, dispatch.Config{Lanes: contentionLanes, GlobalBatchLimit: 250, LaneFor: laneFor, ClaimFor: claimFor})
		if err != nil {
			t.Fatal(err)
		}
		work := make(chan dispatch.Item, 512)
		var workers sync.WaitGroup
		for range 2 {
			workers.Go(func() {
				for it := range work {
					c := it.Claim
					if hash(fmt.Sprint(c.Token))%10 == 0 {
						continue // abandoned: the claim must end by itself
					}
					now := at(clock.Load())
					next := c.Entry
					next.LastRunAt = now
					next.DueAt = now.Add(time.Duration(5+hash(c.Entry.WorkKey+c.Entry.UserID)%40) * time.Second)
					err := idx.Complete(ctx, mustTC(t, c.Entry.UserID), c, next)
					if err != nil && !errors.Is(err, duework.ErrClaimLost) {
						t.Errorf("Complete: %v", err)
					}
					mu.Lock()
					completes[c.Token] = completeRecord{next: next, ok: err == nil}
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			defer func() { close(work); workers.Wait() }()
			for range cycles {
				now := at(clock.Add(1))
				b, err := disp.Dispatch(ctx, now)
				if err != nil {
					t.Errorf("Dispatch: %v", err)
					return
				}
				snap := &recordingIndex{heads: rec.heads, keys: rec.keys}
				mu.Lock()
				for _, it := range b.Items {
					claims = append(claims, claimRecord{c: it.Claim, now: now})
				}
				batches = append(batches, b)
				cycleLog = append(cycleLog, snap)
				mu.Unlock()
				for _, it := range b.Items {
					work <- it
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// No entry handed out twice while its claim lasts: consecutive claims of one entry (in
	// token order, which is claim order) are separated by a successful Complete or by the
	// end of the earlier claim; and each token is new.
	byKey := map[duework.Key][]claimRecord{}
	tokens := map[uint64]bool{}
	for _, cr := range claims {
		if tokens[cr.c.Token] {
			t.Fatalf("token %d handed out twice", cr.c.Token)
		}
		tokens[cr.c.Token] = true
		byKey[cr.c.Entry.Key()] = append(byKey[cr.c.Entry.Key()], cr)
	}
	redispatched := 0
	for k, crs := range byKey {
		slices.SortFunc(crs, func(a, b claimRecord) int { return cmp.Compare(a.c.Token, b.c.Token) })
		for i := 1; i < len(crs); i++ {
			a, b := crs[i-1], crs[i]
			redispatched++
			if done, ok := completes[a.c.Token]; ok && done.ok {
				if b.now.Before(done.next.DueAt) {
					t.Errorf("%v: claimed at %v, before the DueAt %v its completion wrote", k, b.now, done.next.DueAt)
				}
				continue
			}
			if b.now.Before(a.c.Until) {
				t.Errorf("%v: claimed again at %v (token %d) while claim %d lasted until %v", k, b.now, b.c.Token, a.c.Token, a.c.Until)
			}
		}
	}

	// Fair per cycle: caps hold, and within a lane the selection is round robin in the
	// least-recently-served order (rule 1) — checked on what the cycle read and asked for.
	limits := map[dispatch.Lane]dispatch.LaneCapacity{}
	for _, lc := range contentionLanes {
		limits[lc.Lane] = lc
	}
	dispatched, lost := 0, 0
	for i, b := range batches {
		dispatched += len(b.Items)
		for _, l := range b.Lanes {
			lost += l.LostClaims
		}
		if len(b.Items) > 250 {
			t.Errorf("cycle %d dispatched %d items, over the global limit 250", i, len(b.Items))
		}
		perUser := map[string]int{}
		perLane := map[dispatch.Lane]int{}
		for _, it := range b.Items {
			perUser[it.Claim.Entry.UserID]++
			perLane[it.Lane]++
			if perUser[it.Claim.Entry.UserID] > limits[it.Lane].PerUserLimit {
				t.Errorf("cycle %d: user %s got %d items, over lane %s's PerUserLimit", i, it.Claim.Entry.UserID, perUser[it.Claim.Entry.UserID], it.Lane)
			}
		}
		for lane, n := range perLane {
			if n > limits[lane].PerCycleLimit {
				t.Errorf("cycle %d: lane %s dispatched %d, over its PerCycleLimit", i, lane, n)
			}
		}
		checkRoundRobin(t, i, cycleLog[i])
		checkPriority(t, i, cycleLog[i])
	}
	if redispatched == 0 || dispatched < 10_000 {
		t.Fatalf("only %d items dispatched, %d re-dispatched: the test did not exercise contention", dispatched, redispatched)
	}

	// None lost: every entry is still scheduled, and once every claim has ended each of the
	// 1,000 tenants has due work again.
	var n int
	if err := setup.QueryRow(ctx, `SELECT count(*) FROM rota_due`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != contentionEntries {
		t.Fatalf("%d entries left of %d", n, contentionEntries)
	}
	heads, err := postgres.NewIndex(setup).DueHeads(ctx, at(clock.Load()).Add(24*time.Hour), 1)
	if err != nil || len(heads) != contentionUsers {
		t.Fatalf("a day later DueHeads found %d users of %d (%v)", len(heads), contentionUsers, err)
	}
	checkSummary(t, setup)
	t.Logf("%d cycles dispatched %d items (%d re-dispatches of an entry, %d claims lost to another dispatcher)", len(batches), dispatched, redispatched, lost)
}

// checkRoundRobin checks rule 1 on one cycle, from what it read and what it asked to claim.
// In each lane let W be the users that still had due work after the selection and were below
// their PerUserLimit, and m the fewest items any of them got. Round robin means nobody got
// more than m+1, and everyone who got m+1 ranks before every member of W that got m (never
// served first, then the oldest LastServed, then the earliest DueAt, then UserID).
func checkRoundRobin(t *testing.T, cycle int, rec *recordingIndex) {
	t.Helper()
	selected := map[string]int{}
	for _, k := range rec.keys {
		selected[k.UserID]++
	}
	rank := func(a, b duework.Head) int {
		switch {
		case a.LastServed.IsZero() != b.LastServed.IsZero():
			if a.LastServed.IsZero() {
				return -1
			}
			return 1
		case !a.LastServed.Equal(b.LastServed):
			return a.LastServed.Compare(b.LastServed)
		case !a.Due[0].DueAt.Equal(b.Due[0].DueAt):
			return a.Due[0].DueAt.Compare(b.Due[0].DueAt)
		}
		return cmp.Compare(a.UserID, b.UserID)
	}
	for _, lc := range contentionLanes {
		var heads []duework.Head
		for _, h := range rec.heads {
			if contentionLane(h.UserID) == lc.Lane {
				heads = append(heads, h)
			}
		}
		slices.SortFunc(heads, rank)
		wanting := func(h duework.Head) bool {
			s := selected[h.UserID]
			return (h.More || len(h.Due) > s) && s < lc.PerUserLimit
		}
		m := -1
		for _, h := range heads {
			if wanting(h) && (m < 0 || selected[h.UserID] < m) {
				m = selected[h.UserID]
			}
		}
		if m < 0 {
			continue // everyone got all it could
		}
		firstBehind := -1 // the first member of W, in rank order, that got m
		for i, h := range heads {
			s := selected[h.UserID]
			if s > m+1 {
				t.Errorf("cycle %d, lane %s: %s got %d items while another user with due work got %d", cycle, lc.Lane, h.UserID, s, m)
			}
			if firstBehind < 0 && wanting(h) && s == m {
				firstBehind = i
			}
			if s == m+1 && firstBehind >= 0 {
				t.Errorf("cycle %d, lane %s: %s got %d items though %s ranks before it and got %d", cycle, lc.Lane, h.UserID, s, heads[firstBehind].UserID, m)
			}
		}
	}
}

// checkPriority checks rule 3 on one cycle, from what it read and what it asked to claim:
// a lane below another is selected from only when every lane above it got all it could —
// its PerCycleLimit, or everything its users' heads and PerUserLimits allowed.
func checkPriority(t *testing.T, cycle int, rec *recordingIndex) {
	t.Helper()
	selected := map[dispatch.Lane]int{}
	for _, k := range rec.keys {
		selected[contentionLane(k.UserID)]++
	}
	for hi, lc := range contentionLanes[:len(contentionLanes)-1] {
		could := 0
		for _, h := range rec.heads {
			if contentionLane(h.UserID) != lc.Lane {
				continue
			}
			n := len(h.Due)
			if h.More {
				n = lc.PerUserLimit
			}
			could += min(n, lc.PerUserLimit)
		}
		could = min(could, lc.PerCycleLimit)
		lower := 0
		for _, lo := range contentionLanes[hi+1:] {
			lower += selected[lo.Lane]
		}
		if lower > 0 && selected[lc.Lane] < could {
			t.Errorf("cycle %d: lane %s got %d of the %d it could while lower lanes got %d", cycle, lc.Lane, selected[lc.Lane], could, lower)
		}
	}
}

func limitsOf(user string) int {
	for _, lc := range contentionLanes {
		if lc.Lane == contentionLane(user) {
			return lc.PerUserLimit
		}
	}
	return 0
}
