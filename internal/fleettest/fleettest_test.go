package fleettest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	"github.com/rotaworks/rota/tenancy"
)

// recorder is a testing.TB that keeps the errors reported to it and passes everything
// else to the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// runOnce runs l's pipeline for runner on user's source slug, calling hold inside it.
func runOnce(t *testing.T, l *fleettest.RunLog, runner int, user, slug string, hold fleettest.Hold) error {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Pipeline(runner, hold).Run(context.Background(), tc, tenancy.WatchlistEntry{UserID: user, Slug: slug})
	return err
}

// Two runners running one source at once: the run log reports it as the second run
// starts, and CheckEachRanAlone reports it again afterwards, each naming both runners;
// a source that never ran is reported too.
func TestRunLogCatchesAnOverlap(t *testing.T) {
	rec := &recorder{TB: t}
	l := fleettest.NewRunLog(rec, "replica")
	inFirst, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = runOnce(t, l, 0, "ana", "feed", func(context.Context, duework.Key) bool {
			close(inFirst)
			<-release
			return false
		})
	})
	<-inFirst
	if err := runOnce(t, l, 1, "ana", "feed", nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	want := "ana/feed: replica 1 started it while replica 0 was running it"
	if got := rec.errors(); len(got) != 1 || got[0] != want {
		t.Fatalf("during the runs: %q, want only %q", got, want)
	}

	never := duework.Key{UserID: "bob", WorkKey: "feed"}
	l.CheckEachRanAlone(map[duework.Key]bool{{UserID: "ana", WorkKey: "feed"}: true, never: true})
	got := rec.errors()[1:]
	if want := []string{"ana/feed: a run by replica 1 started before the run by replica 0 ended", "bob/feed never ran"}; !slices.Equal(got, want) {
		t.Errorf("CheckEachRanAlone reported %q, want %q", got, want)
	}
}

// Runs one after another are not an overlap; the log counts what was written (not the
// killed run), what ran since a time, and closes Ran's channel once enough sources ran.
func TestRunLogCountsRuns(t *testing.T) {
	rec := &recorder{TB: t}
	l := fleettest.NewRunLog(rec, "worker")
	a, b := duework.Key{UserID: "ana", WorkKey: "a"}, duework.Key{UserID: "ana", WorkKey: "b"}
	two := l.Ran(2)
	start := time.Now()
	if err := runOnce(t, l, 0, "ana", "a", nil); err != nil {
		t.Fatal(err)
	}
	if err := runOnce(t, l, 1, "ana", "a", nil); err != nil {
		t.Fatal(err)
	}
	if err := runOnce(t, l, 1, "ana", "b", func(context.Context, duework.Key) bool { return true }); err == nil {
		t.Error("a killed run returned no error")
	}
	select {
	case <-two:
		t.Fatal("Ran(2) closed with one source run and one killed")
	default:
	}
	if ran, of := l.RanSince(map[duework.Key]bool{a: true, b: true}, start); ran != 1 || of != 2 {
		t.Errorf("RanSince = %d of %d, want 1 of 2", ran, of)
	}
	if err := runOnce(t, l, 0, "ana", "b", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-two:
	default:
		t.Error("Ran(2) still open with both sources run")
	}
	select {
	case <-l.Ran(1):
	default:
		t.Error("Ran(1) asked after the fact is open")
	}
	l.CheckEachRanAlone(map[duework.Key]bool{a: true, b: true})
	if got := rec.errors(); len(got) != 0 {
		t.Errorf("runs one after another reported %q", got)
	}
	if w := l.Written(); w[a] != 2 || w[b] != 1 {
		t.Errorf("Written = %v, want a twice and b once", w)
	}
	if runs := l.All(); len(runs) != 4 || fleettest.Killed(runs) != 1 {
		t.Errorf("%d runs, %d killed; want 4 and 1", len(runs), fleettest.Killed(runs))
	}
}

// A victim's runs go through until KillMidRun; the run under way then is recorded
// killed, and the worker is killed: its index dead, OnKill called, its Run's context
// ended.
func TestVictimKilledMidRun(t *testing.T) {
	runs := fleettest.NewRunLog(t, "worker")
	v := fleettest.NewVictim(t)
	w := fleettest.NewWorker(t, 0, bridge.Bridge{Index: duework.NewMemory(), Watchlist: tenancy.NewMemoryWatchlist(),
		Pipeline: runs.Pipeline(0, v.Hold), Tiers: cadence.NewRegistry()}, bridge.WorkerConfig{})
	defer func() {
		if err := w.Bridge.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	var closed atomic.Bool
	w.OnKill = func() { closed.Store(true) }
	w.Start(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		for runOnce(t, runs, 0, "ana", "feed", v.Hold) == nil { // until a run is killed
		}
	})
	v.KillMidRun(w)
	wg.Wait()
	all := runs.All()
	if last := all[len(all)-1]; !last.Killed || fleettest.Killed(all) != 1 {
		t.Errorf("%d runs, %d killed, the last killed %v; want only the last killed", len(all), fleettest.Killed(all), last.Killed)
	}
	if err := <-w.Done(); err != nil || !w.Index.Dead() || !closed.Load() {
		t.Errorf("after the kill: Run = %v, index dead %v, OnKill called %v; want nil, true, true", err, w.Index.Dead(), closed.Load())
	}
}

// Background's run lasts until the test that started it ends, and no longer.
func TestBackgroundEndsWithTheTest(t *testing.T) {
	var ended atomic.Bool
	started := make(chan struct{})
	t.Run("sub", func(t *testing.T) {
		fleettest.Background(t, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			ended.Store(true)
			return nil
		})
		<-started
		if ended.Load() {
			t.Error("run ended before its test")
		}
	})
	if !ended.Load() {
		t.Error("run still runs after its test ended")
	}
}

func TestJain(t *testing.T) {
	for _, tt := range []struct {
		xs   []int
		want float64
	}{
		{[]int{3, 3, 3, 3}, 1},
		{[]int{4, 0, 0, 0}, 0.25},
		{[]int{1, 3}, 0.8},
		{[]int{0, 0}, 0},
		{nil, 0},
	} {
		if got := fleettest.Jain(tt.xs); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Jain(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// Once killed, a MortalIndex fails every call that writes or checks a claim, and counts
// only the claims it was asked to hand back while alive.
func TestMortalIndex(t *testing.T) {
	m := &fleettest.MortalIndex{Index: duework.NewMemory()}
	ctx := context.Background()
	if _, err := m.Unclaim(ctx, make([]duework.Unclaim, 2)); errors.Is(err, fleettest.ErrDead) {
		t.Fatalf("alive: Unclaim = %v", err)
	}
	m.Kill()
	calls := map[string]error{}
	_, calls["StartClaims"] = m.StartClaims(ctx, nil)
	_, calls["CompleteMany"] = m.CompleteMany(ctx, nil)
	_, calls["Unclaim"] = m.Unclaim(ctx, make([]duework.Unclaim, 5))
	calls["UnscheduleClaimed"] = m.UnscheduleClaimed(ctx, tenancy.Context{}, duework.Claim{})
	for name, err := range calls {
		if !errors.Is(err, fleettest.ErrDead) {
			t.Errorf("dead: %s = %v, want ErrDead", name, err)
		}
	}
	if !m.Dead() || m.Unclaimed() != 2 {
		t.Errorf("Dead = %v, Unclaimed = %d; want true and 2", m.Dead(), m.Unclaimed())
	}
}

// CheckNothingLost passes a source whose streak is its written runs and reports one left
// claimed or with another streak; with EndedClaimsStay an ended claim passes and a
// current one does not.
func TestCheckNothingLost(t *testing.T) {
	rec := &recorder{TB: t}
	s := fleettest.NewStore(rec, duework.NewMemory(), tenancy.NewMemoryWatchlist(), tenancy.NewMemoryEntitlements())
	s.Watch("ana", "pro", 3)
	s.Claimed("paid", "ana", "s001", time.Now().Add(time.Minute))
	now := time.Now()
	ended := now.Add(time.Microsecond)
	if _, err := s.Index.Claim(context.Background(), []duework.Key{{UserID: "ana", WorkKey: "s002"}}, now, ended); err != nil {
		t.Fatal(err)
	}
	for !time.Now().After(ended) { // s002's claim ends
	}
	written := map[duework.Key]int{{UserID: "ana", WorkKey: "s000"}: 1}
	s.CheckNothingLost(written)
	got := strings.Join(rec.errors(), "\n")
	for _, want := range []string{"ana/s000: streak 0 after 1 written runs", "ana/s001 still claimed", "ana/s002 still claimed"} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckNothingLost reported\n%s\nwant %q", got, want)
		}
	}
	rec.errs = nil
	s.EndedClaimsStay = true
	s.CheckNothingLost(map[duework.Key]int{})
	if got := rec.errors(); len(got) != 1 || !strings.HasPrefix(got[0], "ana/s001 still claimed") {
		t.Errorf("with EndedClaimsStay: %q, want only s001 still claimed", got)
	}
}

// A WatchedSink reports a Send past the room last reported, per lane.
func TestWatchedSinkCatchesOverSending(t *testing.T) {
	w := &fleettest.WatchedSink{Sink: fixedRoom{"paid": 2}}
	ctx := context.Background()
	if _, err := w.Room(ctx); err != nil {
		t.Fatal(err)
	}
	items := make([]dispatch.Item, 2)
	for _, send := range []struct {
		lane dispatch.Lane
		n    int
	}{{"paid", 2}, {"free tier", 1}, {"paid", 1}} {
		if err := w.Send(ctx, send.lane, items[:send.n]); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"free tier: 1 sent, room 0", "paid: 3 sent, room 2"}
	if got := w.OverSent(); !slices.Equal(got, want) || w.SentInAll() != 4 {
		t.Errorf("OverSent = %q, SentInAll = %d; want %q and 4", got, w.SentInAll(), want)
	}
}

// fixedRoom is a Sink that reports the same room each time and takes whatever it is sent.
type fixedRoom map[dispatch.Lane]int

func (r fixedRoom) Room(context.Context) (dispatch.Take, error) {
	t := dispatch.Take{PerLane: r}
	for _, n := range r {
		t.Total += n
	}
	return t, nil
}

func (fixedRoom) Send(context.Context, dispatch.Lane, []dispatch.Item) error { return nil }
