// Command limits shows rota's per-tenant flow control on a simulated clock, in three
// scenes, each a Dispatcher over an in-memory Index whose workers run every item for a
// fixed simulated time:
//
//  1. a tenant whose own API allows 2 calls at once and about one a minute
//     (Limits.MaxInFlight and Limits.Every with Burst), beside two tenants without limits
//     in the same lane: it never has more than 2 running nor more than its rate allows,
//     and the others are not slowed by it;
//  2. a weighted tenant (Limits.Weight 3) beside three of weight 1, in a lane that serves
//     two items a cycle: it gets about three times the share of each of the others;
//  3. a lone tenant in an idle lane, with and without LaneCapacity.PerUserBurst: with it,
//     the lane's unused room goes to the tenant, up to the burst, instead of sitting idle,
//     and is shared fairly again as soon as a second tenant has work.
//
// The limits come from the tenants' plans, which are the host's: bridge.PlanLimits maps
// each plan to its limits beside bridge.PlanLanes, and the Index enforces them at Claim,
// for every dispatcher sharing it.
//
//	go run ./examples/limits
//
// Everything is deterministic: the clock is simulated and the Dispatcher reads no time.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		os.Exit(1)
	}
}

// run writes the three scenes to w. A bufio.Writer keeps the first write error and returns
// it from Flush, so one check covers every line.
func run(w io.Writer) error {
	out := bufio.NewWriter(w)
	ctx := context.Background()
	if _, err := capAndRate(ctx, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if _, err := weighted(ctx, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if _, err := burst(ctx, out); err != nil {
		return err
	}
	return out.Flush()
}

// The host's plans and what each buys. Plans are names the host chooses.
const (
	planMetered  tenancy.PlanID = "metered"  // its own API: 2 calls at once, about one a minute
	planStandard tenancy.PlanID = "standard" // no limits
	planBusiness tenancy.PlanID = "business" // a 50-seat customer: three times the share
	planStarter  tenancy.PlanID = "starter"  // a 5-seat customer
)

// capStats is what scene 1 measured.
type capStats struct {
	MaxRunning int            // the most of acme's items running at once
	Started    map[string]int // items started per tenant over the scene
	Shed       map[string]int // cycles in which each tenant was shed
	Minutes    int            // the scene's length
	LimitedAt  []string       // the cycles at which acme's limits held back its work
}

// capAndRate is scene 1: acme's plan caps it at 2 items in flight and one a minute after
// a burst of 3; beta and cara share its lane with no limits. The lane would give each of
// them 3 a cycle. Each item takes 75 s; the Dispatcher runs every 30 s for 10 minutes.
func capAndRate(ctx context.Context, out io.Writer) (capStats, error) {
	const (
		step    = 30 * time.Second
		minutes = 10
	)
	w := newWorld()
	w.work = 75 * time.Second
	metered := duework.Limits{MaxInFlight: 2, Every: time.Minute, Burst: 3}
	lane := dispatch.LaneCapacity{Lane: "standard", PerUserLimit: 3, PerCycleLimit: 9}
	err := w.dispatcher([]dispatch.LaneCapacity{lane}, 9,
		map[tenancy.PlanID]dispatch.Lane{planMetered: "standard", planStandard: "standard"},
		map[tenancy.PlanID]duework.Limits{planMetered: metered, planStandard: {}})
	if err != nil {
		return capStats{}, err
	}
	for _, t := range []struct {
		user string
		plan tenancy.PlanID
	}{{"acme", planMetered}, {"beta", planStandard}, {"cara", planStandard}} {
		if err := w.tenant(ctx, t.user, t.plan, 40, start); err != nil {
			return capStats{}, err
		}
	}

	fmt.Fprintln(out, "1. A cap and a rate: acme's API allows 2 calls at once and one a minute after a burst of 3")
	fmt.Fprintln(out, "   lane standard: 3 items per tenant per cycle, 9 per cycle; every item takes 75s; a cycle every 30s")
	fmt.Fprintln(out, "   acme  MaxInFlight 2, Every 1m, Burst 3   beta, cara  no limits   (40 sources each, all due at 0:00)")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "   time   acme started  running  held by   beta  cara   limited  shed        wait")
	st := capStats{Started: map[string]int{}, Shed: map[string]int{}, Minutes: minutes}
	for now := start; now.Before(start.Add(minutes * time.Minute)); now = now.Add(step) {
		b, err := w.cycle(ctx, now)
		if err != nil {
			return capStats{}, err
		}
		n := started(b)
		for u, k := range n {
			st.Started[u] += k
		}
		for _, u := range b.ShedUserIDs {
			st.Shed[u]++
		}
		running, err := w.inFlight(ctx, "acme", now)
		if err != nil {
			return capStats{}, err
		}
		st.MaxRunning = max(st.MaxRunning, running)
		rep := b.Lanes[0]
		if rep.Limited > 0 {
			st.LimitedAt = append(st.LimitedAt, clock(now))
		}
		fmt.Fprintf(out, "   %-5s  %12d  %5d/%d  %-7s   %4d  %4d   %7d  %-10s  %s\n", clock(now), n["acme"], running, metered.MaxInFlight,
			heldBy(n["acme"], lane.PerUserLimit, metered.MaxInFlight-(running-n["acme"])), n["beta"], n["cara"],
			rep.Limited, list(b.ShedUserIDs), wait(now, rep.WaitingSince))
	}
	last := time.Duration(minutes)*time.Minute - step // from the first cycle to the last
	fmt.Fprintln(out)
	fmt.Fprintf(out, "   acme: at most %d running at once; %d started from 0:00 to %s, as many as its rate allows in that\n",
		st.MaxRunning, st.Started["acme"], clock(start.Add(last)))
	fmt.Fprintf(out, "   window: Burst + floor(%s / Every) = %d + %d\n", last, metered.Burst, int(last/metered.Every))
	fmt.Fprintf(out, "   beta %d, cara %d: 3 every cycle until they ran out, whatever acme could not take; with the lane\n",
		st.Started["beta"], st.Started["cara"])
	fmt.Fprintln(out, "   empty from 7:00, acme still gets no more than its limits allow")
	fmt.Fprintln(out, "   limited counts the tenants read whose own limits held back work (one with no free slot is not")
	fmt.Fprintln(out, "   even read); such a tenant is not shed and sets no lane wait, so no noisy-neighbour alarm fires")
	fmt.Fprintln(out, "   for it: it waits on itself, not on its neighbours")
	return st, nil
}

// weightStats is what scene 2 measured.
type weightStats struct {
	Cycles  int
	Served  map[string]int // items per tenant over the scene
	Weights map[string]int
}

// weighted is scene 2: bigco's plan weighs 3, ann's, bob's and cy's 1, all with deep
// backlogs, in a lane that serves one item per tenant and two per cycle, for 60 cycles.
func weighted(ctx context.Context, out io.Writer) (weightStats, error) {
	const cycles = 60
	w := newWorld()
	err := w.dispatcher([]dispatch.LaneCapacity{{Lane: "standard", PerUserLimit: 1, PerCycleLimit: 2}}, 2,
		map[tenancy.PlanID]dispatch.Lane{planBusiness: "standard", planStarter: "standard"},
		map[tenancy.PlanID]duework.Limits{planBusiness: {Weight: 3}, planStarter: {Weight: 1}})
	if err != nil {
		return weightStats{}, err
	}
	users := []string{"ann", "bigco", "bob", "cy"}
	st := weightStats{Cycles: cycles, Served: map[string]int{}, Weights: map[string]int{"ann": 1, "bigco": 3, "bob": 1, "cy": 1}}
	for _, u := range users {
		plan := planStarter
		if u == "bigco" {
			plan = planBusiness
		}
		if err := w.tenant(ctx, u, plan, 100, start.Add(-time.Minute)); err != nil {
			return weightStats{}, err
		}
	}

	fmt.Fprintln(out, "2. A weighted tenant: bigco (50 seats) weighs 3, ann, bob and cy (5 seats) weigh 1")
	fmt.Fprintf(out, "   lane standard: 1 item per tenant per cycle, 2 per cycle; a cycle a minute from 0:00, %d in all;\n", cycles)
	fmt.Fprintln(out, "   every tenant has 100 sources, due since -1:00, so each always has work")
	fmt.Fprintln(out)
	var turns []string
	for i := range cycles {
		now := start.Add(time.Duration(i) * time.Minute)
		b, err := w.cycle(ctx, now)
		if err != nil {
			return weightStats{}, err
		}
		for u, k := range started(b) {
			st.Served[u] += k
		}
		if i < 12 {
			turns = append(turns, strings.Join(order(b), "+"))
		}
	}
	fmt.Fprintf(out, "   the first 12 cycles served: %s,\n", strings.Join(turns[:6], ", "))
	fmt.Fprintf(out, "                               %s\n", strings.Join(turns[6:], ", "))
	fmt.Fprintln(out)
	fmt.Fprintln(out, "   tenant  weight  items  share   weight's share")
	total := 0
	for _, u := range users {
		total += st.Weights[u]
	}
	for _, u := range users {
		fmt.Fprintf(out, "   %-6s  %6d  %5d  %4.1f%%   %4.1f%%\n", u, st.Weights[u], st.Served[u],
			100*float64(st.Served[u])/float64(2*cycles), 100*float64(st.Weights[u])/float64(total))
	}
	return st, nil
}

// burstStats is what scene 3 measured: items per cycle for each tenant, without and with
// PerUserBurst.
type burstStats struct {
	Without, With []map[string]int
}

// burst is scene 3: lone has 30 sources due in an otherwise idle lane that gives 2 items
// per tenant and 10 per cycle; newco's 10 sources come due at the third cycle. The same
// five cycles run once without PerUserBurst and once with PerUserBurst 8.
func burst(ctx context.Context, out io.Writer) (burstStats, error) {
	var st burstStats
	for _, perUserBurst := range []int{0, 8} {
		w := newWorld()
		err := w.dispatcher([]dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10, PerUserBurst: perUserBurst}}, 10,
			map[tenancy.PlanID]dispatch.Lane{"pro": "pro"}, map[tenancy.PlanID]duework.Limits{"pro": {}})
		if err != nil {
			return burstStats{}, err
		}
		if err := w.tenant(ctx, "lone", "pro", 30, start); err != nil {
			return burstStats{}, err
		}
		if err := w.tenant(ctx, "newco", "pro", 10, start.Add(2*time.Minute)); err != nil {
			return burstStats{}, err
		}
		var cycles []map[string]int
		for i := range 5 {
			b, err := w.cycle(ctx, start.Add(time.Duration(i)*time.Minute))
			if err != nil {
				return burstStats{}, err
			}
			cycles = append(cycles, started(b))
		}
		if perUserBurst == 0 {
			st.Without = cycles
		} else {
			st.With = cycles
		}
	}

	fmt.Fprintln(out, "3. A lone tenant in an idle lane: lone has 30 sources due; newco's 10 come due at 2:00")
	fmt.Fprintln(out, "   lane pro: 2 items per tenant per cycle (PerUserLimit), 10 per cycle; a cycle a minute")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "          without PerUserBurst    with PerUserBurst 8")
	fmt.Fprintln(out, "   time   lone  newco  idle       lone  newco  idle")
	for i := range st.Without {
		a, b := st.Without[i], st.With[i]
		fmt.Fprintf(out, "   %-5s  %4d  %5d  %4d       %4d  %5d  %4d\n", clock(start.Add(time.Duration(i)*time.Minute)),
			a["lone"], a["newco"], 10-a["lone"]-a["newco"], b["lone"], b["newco"], 10-b["lone"]-b["newco"])
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "   with the burst, once every tenant read has had its fair part (2), the lane's room goes on")
	fmt.Fprintln(out, "   in rounds, one more item per tenant per round, up to PerUserBurst each: alone, lone takes 8")
	fmt.Fprintln(out, "   of the 10 instead of 2; once newco has work it gets its fair part first, and the two share")
	fmt.Fprintln(out, "   the rest, 5 and 5")
	return st, nil
}

// heldBy says which of a tenant's limits kept it below what the lane would give it
// (perUser): "cap" when it took every free in-flight slot, "rate" when it took fewer, "-"
// when the lane's own limit was reached.
func heldBy(started, perUser, freeSlots int) string {
	switch {
	case started >= perUser:
		return "-"
	case started == freeSlots:
		return "cap"
	default:
		return "rate"
	}
}

// list joins user IDs, or says "-" for none.
func list(users []string) string {
	if len(users) == 0 {
		return "-"
	}
	return strings.Join(slices.Clone(users), ",")
}

// wait is the lane's wait, now − waitingSince, or "-" when nobody waited.
func wait(now, waitingSince time.Time) string {
	if waitingSince.IsZero() {
		return "-"
	}
	return now.Sub(waitingSince).String()
}
