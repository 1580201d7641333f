// Command pushback shows rota when the upstream API behind a tenant's sources pushes back,
// on a simulated clock: four tenants over an in-memory Index, polled by a Runner through a
// stand-in of their upstream, a cycle a minute for an hour and a quarter.
//
//   - acme's account at the upstream allows 30 calls an hour, and rota would poll its four
//     sources 48 times: once they are spent the upstream answers 429 with Retry-After, the
//     pipeline returns a *bridge.Pushback, and the whole tenant is paused until then —
//     none of its sources is polled — and resumed on time;
//   - beta's credentials for one source, crm, are revoked for a while: the upstream answers
//     401, the pipeline returns a plain error, and that source alone backs off by the
//     Bridge's Retry policy (bridge.DefaultRetry: 1, 2, 4, 8 … minutes), is named once
//     by a "rota: source failing" line, and recovers once the credentials are renewed;
//   - every other source, beta's others included, is polled every 5 minutes throughout.
//
// The pipeline (pipeline.go) is the part a host writes: which answers pause the tenant,
// which fail only the source.
//
//	go run ./examples/pushback
//
// Everything is deterministic: the clock is simulated (the Runner's Cycle takes now, the
// upstream reads the same now), and the Runner has one worker, so a cycle's items reach
// the upstream in dispatch order.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pushback:", err)
		os.Exit(1)
	}
}

// run simulates and writes what happened to w. A bufio.Writer keeps the first write
// error and returns it from Flush, so one check covers every line.
func run(ctx context.Context, w io.Writer) error {
	st, err := simulate(ctx)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(w)
	printStory(out, st)
	return out.Flush()
}

// The simulation's clock: a cycle a minute from start, the last at start + length.
const (
	step   = time.Minute
	length = 75 * time.Minute
)

// start is the simulated clock's first instant, on the hour: acme's quota counts calls in
// clock hours.
var start = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// tenant is one of the host's tenants and the sources it watches, all on the hot tier:
// polled every 5 minutes while each poll finds something new, as every poll here does.
type tenant struct {
	user    string
	sources []string
}

var tenants = []tenant{
	{"acme", []string{"customers", "invoices", "orders", "refunds"}},
	{"beta", []string{"crm", "docs", "mail"}},
	{"cara", []string{"blog", "jobs", "news"}},
	{"dana", []string{"feed", "forum", "status"}},
}

// The upstream's rules: acme may make 30 calls an hour; beta's credentials for crm are
// revoked from 0:02 to 0:50.
var (
	quota   = map[string]int{"acme": 30}
	revoked = map[string]period{"beta/crm": {start.Add(2 * time.Minute), start.Add(50 * time.Minute)}}
)

// deployment is the wiring: what a service builds once.
type deployment struct {
	idx    *duework.Memory
	up     *upstream
	runner *bridge.Runner
	log    *logBuffer
}

// wire builds the deployment and watches every tenant's sources, all due by the first
// cycle.
func wire(ctx context.Context) (*deployment, error) {
	idx := duework.NewMemory()
	watchlist := tenancy.NewMemoryWatchlist()
	plans := tenancy.NewMemoryEntitlements()
	up := newUpstream(quota, revoked)
	pipeline := &poller{client: &http.Client{Transport: up}, api: "https://api.example.com"}
	// Retry is left nil: failing sources back off by bridge.DefaultRetry.
	b := &bridge.Bridge{Index: idx, Watchlist: watchlist, Pipeline: pipeline, Tiers: cadence.NewRegistry()}

	lanes := []dispatch.LaneCapacity{{Lane: "standard", PerUserLimit: 4, PerCycleLimit: 20}}
	laneFor, err := bridge.PlanLanes(plans, map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: "standard"}, lanes)
	if err != nil {
		return nil, err
	}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 20, LaneFor: laneFor, ClaimFor: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	// One worker: a cycle's items reach the upstream one after another, in dispatch order,
	// so every run of the program prints the same.
	log := &logBuffer{}
	r, err := bridge.NewRunner(b, d, bridge.RunnerConfig{Interval: step, Workers: 1, Logger: log.logger()})
	if err != nil {
		return nil, err
	}

	for _, t := range tenants {
		tc, err := tenancy.NewContext(t.user)
		if err != nil {
			return nil, err
		}
		var entries []tenancy.WatchlistEntry
		for _, s := range t.sources {
			entries = append(entries, tenancy.WatchlistEntry{UserID: t.user, Slug: s, Tier: "hot"})
		}
		// Watched one base interval before the start: every source comes due by then.
		if _, err := b.Watch(ctx, tc, entries, start.Add(-cadence.TierHot.Base)); err != nil {
			return nil, err
		}
	}
	return &deployment{idx: idx, up: up, runner: r, log: log}, nil
}

// story is what the simulation saw: what it prints and what its test checks.
type story struct {
	runs   map[string][]poll // each source's runs, by "tenant/source", in time order
	paused []pausedAt        // Index.Paused after every cycle
	lines  []logLine         // the Runner's lines an operator acts on
}

// poll is one item of a source: when it was dispatched, how it ended, and its entry as
// written back.
type poll struct {
	at     time.Time
	status bridge.ItemStatus
	next   duework.Entry
}

// pausedAt is what Index.Paused returned after the cycle at at.
type pausedAt struct {
	at    time.Time
	users []duework.UserPause
}

// logLine is one line the Runner logged in the cycle at at.
type logLine struct {
	at   time.Time
	text string
}

// simulate runs a cycle a minute from start to start + length, each at its own simulated
// now, and records every item's outcome, the paused tenants and the operator's lines.
func simulate(ctx context.Context) (story, error) {
	dep, err := wire(ctx)
	if err != nil {
		return story{}, err
	}
	st := story{runs: map[string][]poll{}}
	for now := start; !now.After(start.Add(length)); now = now.Add(step) {
		dep.up.set(now)
		// Cycle's error is rep.Err(), the report's failures joined. The failed runs are what
		// this program shows; unexpected finds anything else in the report.
		rep, _ := dep.runner.Cycle(ctx, now)
		if err := errors.Join(ctx.Err(), unexpected(rep)); err != nil {
			return story{}, fmt.Errorf("cycle at %s: %w", clock(now), err)
		}
		for _, it := range rep.Items {
			e := it.Item.Claim.Entry
			key := e.UserID + "/" + e.WorkKey
			st.runs[key] = append(st.runs[key], poll{at: now, status: it.Status, next: it.Next})
		}
		// What an operator's page lists: every tenant paused at now.
		users, err := dep.idx.Paused(ctx, now, "", duework.MaxLimit)
		if err != nil {
			return story{}, err
		}
		st.paused = append(st.paused, pausedAt{at: now, users: users})
		for _, l := range dep.log.take() {
			st.lines = append(st.lines, logLine{at: now, text: l})
		}
	}
	return st, nil
}

// unexpected returns what of a cycle's report this simulation does not expect: a failed
// dispatch, probe or write, an item whose outcome was not written, or an outcome other
// than a hit, a failed run, a pushback, or a hand-back of an item whose tenant a pushback
// of the same cycle paused.
func unexpected(rep bridge.CycleReport) error {
	errs := append([]error{rep.DispatchErr, rep.ProbeErr}, rep.FlushErrs...)
	pushedBack := map[string]bool{}
	for _, it := range rep.Items {
		if it.Status == bridge.StatusPaused {
			pushedBack[it.Item.Claim.Entry.UserID] = true
		}
	}
	for _, it := range rep.Items {
		e := it.Item.Claim.Entry
		switch it.Status {
		case bridge.StatusHit, bridge.StatusError, bridge.StatusPaused:
		case bridge.StatusReleased:
			if !pushedBack[e.UserID] {
				errs = append(errs, fmt.Errorf("%s/%s: released, with no pushback of its tenant: %w", e.UserID, e.WorkKey, it.Err))
			}
		default:
			errs = append(errs, fmt.Errorf("%s/%s: unexpected %s: %w", e.UserID, e.WorkKey, it.Status, it.Err))
		}
		if !it.Written {
			errs = append(errs, fmt.Errorf("%s/%s: %s, not written: %w", e.UserID, e.WorkKey, it.Status, it.Err))
		}
	}
	if len(rep.Shed) > 0 || len(rep.Unrouted) > 0 {
		errs = append(errs, fmt.Errorf("shed %v, unrouted %v: the lane has room for every source", rep.Shed, rep.Unrouted))
	}
	return errors.Join(errs...)
}

// clock formats an instant of the simulation as hours and minutes since its start.
func clock(t time.Time) string {
	d := t.Sub(start)
	return fmt.Sprintf("%d:%02d", int(d.Hours()), int(d.Minutes())%60)
}
