package inspecttest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
)

var rules = []rule{
	{"OverviewWorstLaneFirst", "the overview lists every lane with its wait now (now − the Turn of its first ready user), the lane that keeps a tenant waiting longest first", overviewWorstLaneFirst},
	{"OverviewCycles", "the overview shows each lane's last cycles and the lateness of its most overdue work; a bridge report replaces the dispatch report of its cycle", overviewCycles},
	{"OverviewAlarms", "the overview shows the alarms raised, with who crowds the lane, until the lane recovers", overviewAlarms},
	{"OverviewUnrouted", "the overview shows the new tenants waiting for a lane and why the last cycle could not route some", overviewUnrouted},
	{"LaneTurnOrder", "the lane page lists the lane's ready tenants in turn order, as Ready with no hold reads them, with their wait, limits and in-flight counts, and holds nobody", laneTurnOrder},
	{"LanePaging", "the lane page pages with ?after=&limit= and next, and refuses a bad query and an unknown lane", lanePaging},
	{"TenantState", "the tenant page shows the tenant's group, limits, LastServed, Turn, hold, in-flight count and its entries with their claims", tenantState},
	{"TenantPaging", "the tenant page pages its entries by work key with ?after=&limit= and next, and answers 404 for an unknown tenant and 400 for bad input", tenantPaging},
	{"Maintenance", "the maintenance page reads every task's state and the gauge from the StateStore alone, and shows the last poll", maintenancePage},
	{"EscapedIDs", "tenant IDs and work keys that need escaping address the right tenant and entry, and render as text", escapedIDs},
	{"DueNow", "due-now makes a scheduled entry due now, keeping its streak, and the next cycle dispatches it", dueNow},
	{"DueNowClaimed", "due-now refuses a claimed entry with 409 and writes nothing", dueNowClaimed},
	{"DueNowAlreadyDue", "due-now leaves an entry that is already due as it is, and says so", dueNowAlreadyDue},
	{"DueNowNotFound", "due-now answers 404 for an unknown tenant or entry", dueNowNotFound},
	{"Reroute", "reroute resolves the tenant's lane again through the Dispatcher", reroute},
	{"ActionsOff", "without Config.Actions every action is refused with 403 and the pages have no forms", actionsOff},
	{"CrossOrigin", "a cross-origin POST is refused with 403 and changes nothing", crossOrigin},
	{"FormActions", "the pages' forms carry out the actions and answer 303 to the tenant's page, which says how the action ended", formActions},
	{"StoreErrorsWithheld", "a store's error never reaches a page or a JSON answer: they say what failed with a reference, and the log holds the error under it", storeErrorsWithheld},
	{"AlarmHistory", "the alarm log keeps noisy-neighbour and late-work alarms, raised and recovered, in a ring of its own that outlives the cycles kept; raised late-work alarms are listed until they recover", alarmHistory},
	{"RatePrecision", "a duration is shown at its precision: a rate of one per 200 ms reads so", ratePrecision},
	{"NextTurnAtCap", "a tenant at its in-flight cap is shown as served again when one of its runs completes, its Turn being when it would be otherwise", nextTurnAtCap},
	{"TenantPause", "the tenant page shows the tenant's pause, until when and why, as Index.User reads it, and none once it has ended", tenantPause},
	{"ErrorStreaks", "the tenant page shows each entry's error streak, and marks failing those at or over AlarmAfterErrors", errorStreaks},
	{"PauseResume", "pause pauses the tenant in the index for the duration asked, with the reason operator, so no dispatcher serves it, never shortening a longer pause; resume ends it; bad input is refused with 400 and an unknown tenant with 404, writing nothing", pauseResume},
	{"PauseForms", "the pages' pause and resume forms carry out the actions and answer 303 to the tenant's page, which says how they ended", pauseForms},
	{"PausedPaging", "the overview lists the first tenants paused now in tenant ID order, and /paused pages through them all with ?after=&limit= and next, leaving out ended pauses", pausedPaging},
	{"FailingSources", "the overview lists the sources whose written ErrorStreak reached AlarmAfterErrors in the Runner's reports, with their error withheld, until a later report shows them succeed or removed, or their next run is a retry interval overdue; the alarm log says when", failingSources},
}

// backlog schedules n free tenants (free-1 … free-n), each with one entry due minutes ago,
// free-1 the oldest.
func (f *fixture) backlog(n int) {
	for k := 1; k <= n; k++ {
		f.schedule(duework.Entry{UserID: fmt.Sprintf("free-%d", k), WorkKey: "feed", Tier: "hot", DueAt: at(-600 + 60*k)})
	}
}

// overview reads the overview's JSON.
func (f *fixture) overview() overviewJSON {
	f.t.Helper()
	var v overviewJSON
	f.getJSON("/api/", 200, &v)
	return v
}

// waitOf is now − the Turn of group's first ready user, read from the Index directly.
func (f *fixture) waitOf(group string, now time.Time) (string, float64) {
	f.t.Helper()
	page, err := f.st.Index.Ready(f.ctx, duework.ReadyQuery{Group: group, Now: now, Users: 1, PerUser: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(page.Heads) == 0 {
		return "", 0
	}
	return page.Heads[0].UserID, now.Sub(page.Heads[0].Turn).Seconds()
}

func overviewWorstLaneFirst(f *fixture) {
	f.backlog(5)
	f.setLane("pro-1", "pro")
	f.schedule(duework.Entry{UserID: "pro-1", WorkKey: "feed", Tier: "hot", DueAt: at(-30)})
	f.dispatch(t0) // routes everyone, serves pro-1 and two free tenants
	now := at(45)
	f.clock.set(now)
	v := f.overview()
	if len(v.Lanes) != 2 {
		f.fatalf("overview has %d lanes, want 2: %+v", len(v.Lanes), v.Lanes)
	}
	if v.Lanes[0].Lane != "free" || v.Lanes[1].Lane != "pro" {
		f.errorf("lanes in order %q, %q; want free (a tenant waits) before pro (nobody waits)", v.Lanes[0].Lane, v.Lanes[1].Lane)
	}
	for _, l := range v.Lanes {
		user, wait := f.waitOf(l.Lane, now)
		if l.NextUser != user || l.WaitSeconds != wait {
			f.errorf("lane %s: next_user %q, wait_seconds %v; Ready with no hold says %q, %v", l.Lane, l.NextUser, l.WaitSeconds, user, wait)
		}
		if user != "" && !l.WaitingSince.Equal(now.Add(-time.Duration(wait*float64(time.Second)))) {
			f.errorf("lane %s: waiting_since %v, want now − wait", l.Lane, l.WaitingSince)
		}
		if l.Error != "" {
			f.errorf("lane %s: error %q", l.Lane, l.Error)
		}
	}
	if v.Lanes[0].WaitSeconds <= 0 {
		f.errorf("the free lane's wait is %v, want > 0: three free tenants were left waiting", v.Lanes[0].WaitSeconds)
	}
	if !v.Now.Equal(now) || !v.Actions {
		f.errorf("now %v, actions %v; want %v, true", v.Now, v.Actions, now)
	}
	page := f.getHTML("/", 200)
	iFree, iPro := strings.Index(page, `href="./lanes/free"`), strings.Index(page, `href="./lanes/pro"`)
	if iFree < 0 || iPro < 0 || iFree > iPro {
		f.errorf("the overview page links free at %d and pro at %d; want both, free first", iFree, iPro)
	}
	if !strings.Contains(page, "Waiting longest") || !strings.Contains(page, "<svg") {
		f.errorf("the overview page has no headline or no chart:\n%s", page)
	}
}

func overviewCycles(f *fixture) {
	f.backlog(3)
	b := f.dispatch(t0)
	f.clock.set(at(1))
	v := f.overview()
	if v.Cycles != 1 || v.LastCycle == nil || v.LastCycle.Source != "dispatch" || v.LastCycle.Dispatched != len(b.Items) {
		f.fatalf("after one dispatch: cycles_kept %d, last_cycle %+v; want 1, a dispatch report of %d items", v.Cycles, v.LastCycle, len(b.Items))
	}
	free := laneNamed(f, v.Lanes, "free")
	// The lane reads the two tenants it can serve; free-3, due at t0−420 s, waits.
	if len(free.Cycles) != 1 || free.Cycles[0].Dispatched != 2 || free.Cycles[0].Users != 2 || free.Cycles[0].WaitSeconds != 420 {
		f.errorf("free's cycles %+v; want one: 2 users read, 2 dispatched, a wait of 420 s", free.Cycles)
	}
	// The Runner's report of the same cycle replaces the dispatch report, and carries the
	// lanes' lateness.
	rep := bridge.CycleReport{Now: t0, Dispatched: len(b.Items), Hits: 1, Misses: 1, Lanes: slices.Clone(b.Lanes)}
	for k := range rep.Lanes {
		if rep.Lanes[k].Lane == "free" {
			rep.Lanes[k].OldestDue = at(-540)
			rep.Lanes[k].Overdue = []dispatch.Overdue{{UserID: "free-1", DueAt: at(-540)}}
		}
	}
	f.insp.ObserveCycle(rep)
	v = f.overview()
	free = laneNamed(f, v.Lanes, "free")
	if v.Cycles != 1 || v.LastCycle.Source != "bridge" || v.LastCycle.Hits != 1 {
		f.errorf("after the bridge report of the same cycle: cycles_kept %d, last_cycle %+v; want 1, the bridge report", v.Cycles, v.LastCycle)
	}
	if free.LateSeconds != 540 || !free.OldestDue.Equal(at(-540)) || !free.AsOf.Equal(t0) ||
		len(free.Overdue) != 1 || free.Overdue[0].UserID != "free-1" || free.Overdue[0].LateSeconds != 540 {
		f.errorf("free: lateness %v, oldest_due %v, as_of %v, overdue %+v; want 540 s, t0−540 s, t0, free-1 540 s late",
			free.LateSeconds, free.OldestDue, free.AsOf, free.Overdue)
	}
	if free.Cycles[0].LateSeconds != 540 {
		f.errorf("free's cycle lateness %v, want 540", free.Cycles[0].LateSeconds)
	}
	// The ring keeps History (10) cycles.
	for k := 1; k <= 12; k++ {
		f.dispatch(at(k * 10))
	}
	if v = f.overview(); v.Cycles != 10 || len(laneNamed(f, v.Lanes, "free").Cycles) != 10 {
		f.errorf("after 13 cycles: cycles_kept %d; want History, 10", v.Cycles)
	}
}

func laneNamed(f *fixture, ls []laneJSON, name string) laneJSON {
	f.t.Helper()
	for _, l := range ls {
		if l.Lane == name {
			return l
		}
	}
	f.fatalf("no lane %q in %+v", name, ls)
	return laneJSON{}
}

func overviewAlarms(f *fixture) {
	crowd := []bridge.UserItems{{UserID: "noisy", Items: 2}}
	f.insp.ObserveCycle(bridge.CycleReport{Now: t0, Alarms: []bridge.WaitAlarm{{Lane: "free", Wait: 15 * time.Minute, Crowding: crowd}}})
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(60)})
	v := f.overview()
	if len(v.Alarms) != 1 || v.Alarms[0].Lane != "free" || v.Alarms[0].WaitSeconds != 900 || !v.Alarms[0].RaisedAt.Equal(t0) ||
		len(v.Alarms[0].Crowding) != 1 || v.Alarms[0].Crowding[0] != (userItemsJSON{UserID: "noisy", Items: 2}) {
		f.errorf("alarms %+v; want free's, raised at t0, 900 s, crowded by noisy with 2 items", v.Alarms)
	}
	if a := laneNamed(f, v.Lanes, "free").Alarm; a == nil || a.Lane != "free" {
		f.errorf("the free lane's alarm is %+v, want the raised alarm", a)
	}
	if page := f.getHTML("/", 200); !strings.Contains(page, "Noisy neighbour") || !strings.Contains(page, "noisy") {
		f.errorf("the overview page does not show the alarm:\n%s", page)
	}
	// A report of an earlier cycle that arrives late does not end it; the lane's recovery does.
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(-60), Recovered: []dispatch.Lane{"free"}})
	if v = f.overview(); len(v.Alarms) != 1 {
		f.errorf("an earlier cycle's recovery, told late, ended the alarm: %+v", v.Alarms)
	}
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(120), Recovered: []dispatch.Lane{"free"}})
	v = f.overview()
	if len(v.Alarms) != 0 || laneNamed(f, v.Lanes, "free").Alarm != nil {
		f.errorf("after free recovered: alarms %+v, want none", v.Alarms)
	}
	if len(v.AlarmLog) < 2 || v.AlarmLog[0].Event != "recovered" {
		f.errorf("alarm_log %+v; want the recovery first, then the raise", v.AlarmLog)
	}
}

func overviewUnrouted(f *fixture) {
	f.schedule(duework.Entry{UserID: "newcomer", WorkKey: "feed", Tier: "hot", DueAt: at(-90)})
	f.clock.set(t0)
	v := f.overview()
	user, wait := f.waitOf("", t0)
	if v.UnroutedGroup.NextUser != "newcomer" || v.UnroutedGroup.NextUser != user || v.UnroutedGroup.WaitSeconds != wait {
		f.errorf("unrouted_group %+v; Ready of the unrouted group says %q waits %v s", v.UnroutedGroup, user, wait)
	}
	// A reason in rota's own words is shown as it is; the host's error is withheld.
	gold := fmt.Errorf("dispatch: LaneFor(%q): %w %q", "newcomer", dispatch.ErrUnknownLane, "gold")
	f.insp.ObserveCycle(bridge.CycleReport{Now: t0, Unrouted: []dispatch.Unrouted{
		{UserID: "newcomer", Err: gold}, {UserID: "other", Err: errors.New("plan lookup: " + secret)}}})
	v = f.overview()
	if v.UnroutedCount != 2 || len(v.UnroutedUsers) != 2 || v.UnroutedUsers[0] != (unroutedJSON{UserID: "newcomer", Reason: gold.Error()}) {
		f.errorf("unrouted_users %+v, count %d; want newcomer: %v, then other", v.UnroutedUsers, v.UnroutedCount, gold)
	}
	var tj tenantJSON
	f.getJSON("/api/tenants/newcomer", 200, &tj)
	if tj.UnroutedReason != gold.Error() || tj.Group != "" {
		f.errorf("the tenant page of newcomer: unrouted_reason %q, group %q; want %q, the unrouted group", tj.UnroutedReason, tj.Group, gold)
	}
	if len(v.UnroutedUsers) == 2 {
		f.checkWithheld("the other tenant's unrouted reason", v.UnroutedUsers[1].Reason)
	}
}

func limitsOf(l duework.Limits) limitsJSON {
	return limitsJSON{Weight: l.Weight, MaxInFlight: l.MaxInFlight, EverySeconds: l.Every.Seconds(), Burst: l.Burst}
}

// readyOrder is the group's ready users in turn order, read with no hold.
func (f *fixture) readyOrder(group string, now time.Time, n int) []duework.Head {
	f.t.Helper()
	page, err := f.st.Index.Ready(f.ctx, duework.ReadyQuery{Group: group, Now: now, Users: n, PerUser: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	return page.Heads
}

func laneTurnOrder(f *fixture) {
	f.backlog(6)
	f.dispatch(t0) // routes the six to free and serves two
	limits := duework.Limits{MaxInFlight: 3, Weight: 2}
	if err := f.st.Index.Route(f.ctx, []duework.Route{{UserID: "free-4", Group: "free", Limits: limits}}); err != nil {
		f.t.Fatal(err)
	}
	f.schedule(duework.Entry{UserID: "free-4", WorkKey: "more", Tier: "hot", DueAt: at(-30)})
	f.claim("free-4", "more", at(1), time.Hour)
	now := at(30)
	f.clock.set(now)
	var v laneViewJSON
	f.getJSON("/api/lanes/free", 200, &v)
	want := f.readyOrder("free", now, 50)
	if len(v.Users) != len(want) || len(want) == 0 {
		f.fatalf("the lane page lists %d users, Ready %d", len(v.Users), len(want))
	}
	for k, h := range want {
		u := v.Users[k]
		if u.UserID != h.UserID || u.Position != k+1 || !u.Turn.Equal(h.Turn) || u.WaitedSeconds != now.Sub(h.Turn).Seconds() ||
			u.InFlight != h.InFlight || u.Limits != limitsOf(h.Limits) {
			f.errorf("user %d: %+v; Ready says %+v", k+1, u, h)
		}
		if len(h.Due) > 0 && (!u.OldestDue.Equal(h.Due[0].DueAt) || u.LateSeconds != now.Sub(h.Due[0].DueAt).Seconds()) {
			f.errorf("user %s: oldest_due %v, late %v; want %v", u.UserID, u.OldestDue, u.LateSeconds, h.Due[0].DueAt)
		}
	}
	var four *laneUserJSON
	for k := range v.Users {
		if v.Users[k].UserID == "free-4" {
			four = &v.Users[k]
		}
	}
	if four == nil || four.InFlight != 1 || four.Limits.MaxInFlight != 3 || four.Limits.Weight != 2 {
		f.errorf("free-4 on the lane page: %+v; want in_flight 1, max_in_flight 3, weight 2", four)
	}
	if v.Lane.Lane != "free" || v.Lane.Capacity.PerCycleLimit != 2 || v.Next != "" {
		f.errorf("lane %+v, next %q; want free with its capacity, no next page", v.Lane, v.Next)
	}
	// The read held nobody: a dispatcher reads the same users.
	if got := f.readyOrder("free", now, 50); len(got) != len(want) {
		f.errorf("after the lane page, Ready reads %d users, want %d: the page held some", len(got), len(want))
	}
	page := f.getHTML("/lanes/free", 200)
	if !strings.Contains(page, `href="../tenants/free-3"`) || !strings.Contains(page, "at most 3 in flight") {
		f.errorf("the lane page lacks a tenant link or free-4's limits:\n%s", page)
	}
}

func lanePaging(f *fixture) {
	f.backlog(7)
	f.dispatch(t0)
	now := at(30)
	f.clock.set(now)
	var got []string
	after := ""
	for range 10 {
		var v laneViewJSON
		path := "/api/lanes/free?limit=2"
		if after != "" {
			path += "&after=" + after
		}
		f.getJSON(path, 200, &v)
		if len(v.Users) > 2 {
			f.errorf("%s lists %d users", path, len(v.Users))
		}
		for _, u := range v.Users {
			got = append(got, u.UserID)
		}
		if v.Next == "" {
			break
		}
		after = v.Next
	}
	var want []string
	for _, h := range f.readyOrder("free", now, 50) {
		want = append(want, h.UserID)
	}
	if !slices.Equal(got, want) {
		f.errorf("the pages list %v, Ready %v", got, want)
	}
	for _, path := range []string{"/api/lanes/free?limit=0", "/api/lanes/free?limit=x", "/api/lanes/free?after=-1",
		"/api/lanes/free?limit=" + strconv.Itoa(500) + "&after=4600"} {
		f.getJSON(path, 400, nil)
	}
	f.getJSON("/api/lanes/gold", 404, nil)
	f.getHTML("/lanes/gold", 404)
}

func tenantState(f *fixture) {
	f.setLane("acme", "pro")
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "a-due", Tier: "hot", DueAt: at(-120)})
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "b-later", Tier: "cold", DueAt: at(3600), LastRunAt: at(-7200), MissStreak: 3})
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "c-claimed", Tier: "hot", DueAt: at(-60)})
	if err := f.st.Index.Route(f.ctx, []duework.Route{{UserID: "acme", Group: "pro", Limits: duework.Limits{MaxInFlight: 2, Every: time.Minute, Burst: 3}}}); err != nil {
		f.t.Fatal(err)
	}
	f.claim("acme", "c-claimed", t0, 5*time.Minute)
	now := at(30)
	f.clock.set(now)
	var v tenantJSON
	f.getJSON("/api/tenants/acme", 200, &v)
	st, err := f.st.Index.User(f.ctx, "acme", now)
	if err != nil {
		f.t.Fatal(err)
	}
	if v.UserID != "acme" || v.Group != "pro" || v.Lane != "pro" || v.InFlight != 1 || v.InFlight != st.InFlight ||
		!v.LastServed.Equal(st.LastServed) || !v.Turn.Equal(st.Turn) || !v.HeldUntil.Equal(st.HeldUntil) ||
		v.Limits != (limitsJSON{MaxInFlight: 2, EverySeconds: 60, Burst: 3}) {
		f.errorf("tenant %+v; User says %+v", v, st)
	}
	if v.Ready != (!st.Turn.After(now)) || (v.Ready && v.WaitedSeconds != now.Sub(st.Turn).Seconds()) {
		f.errorf("ready %v, waited %v; Turn %v at now %v", v.Ready, v.WaitedSeconds, st.Turn, now)
	}
	want := []entryJSON{
		{WorkKey: "a-due", Tier: "hot", DueAt: at(-120), Status: "due", LateSeconds: 150},
		{WorkKey: "b-later", Tier: "cold", DueAt: at(3600), LastRunAt: at(-7200), MissStreak: 3, Status: "scheduled"},
		{WorkKey: "c-claimed", Tier: "hot", DueAt: at(-60), ClaimedUntil: at(300), Status: "claimed"},
	}
	if len(v.Entries) != len(want) {
		f.fatalf("entries %+v, want %+v", v.Entries, want)
	}
	for k, w := range want {
		if e := v.Entries[k]; e.WorkKey != w.WorkKey || e.Tier != w.Tier || !e.DueAt.Equal(w.DueAt) || !e.LastRunAt.Equal(w.LastRunAt) ||
			e.MissStreak != w.MissStreak || !e.ClaimedUntil.Equal(w.ClaimedUntil) || e.Status != w.Status || e.LateSeconds != w.LateSeconds {
			f.errorf("entry %d: %+v, want %+v", k, e, w)
		}
	}
	page := f.getHTML("/tenants/acme", 200)
	for _, s := range []string{"b-later", "c-claimed", `href="../lanes/pro"`, `action="../actions/due-now"`, "at most 2 in flight"} {
		if !strings.Contains(page, s) {
			f.errorf("the tenant page lacks %q:\n%s", s, page)
		}
	}
}

func tenantPaging(f *fixture) {
	var keys []string
	for k := range 7 {
		key := fmt.Sprintf("src-%02d", k)
		keys = append(keys, key)
		f.schedule(duework.Entry{UserID: "acme", WorkKey: key, Tier: "hot", DueAt: at(k)})
	}
	var got []string
	after := ""
	for range 10 {
		var v tenantJSON
		path := "/api/tenants/acme?limit=3"
		if after != "" {
			path += "&after=" + after
		}
		f.getJSON(path, 200, &v)
		for _, e := range v.Entries {
			got = append(got, e.WorkKey)
		}
		if v.After != after || len(v.Entries) > 3 {
			f.errorf("%s: after %q, %d entries", path, v.After, len(v.Entries))
		}
		if v.Next == "" {
			break
		}
		after = v.Next
	}
	if !slices.Equal(got, keys) {
		f.errorf("the pages list %v, want %v", got, keys)
	}
	f.getJSON("/api/tenants/nobody", 404, nil)
	f.getHTML("/tenants/nobody", 404)
	for _, path := range []string{"/api/tenants/acme?limit=0", "/api/tenants/acme?limit=501", "/api/tenants/%01", "/api/tenants/%20x"} {
		f.getJSON(path, 400, nil)
	}
	if page := f.getHTML("/tenants/acme?limit=3", 200); !strings.Contains(page, "after=src-02") {
		f.errorf("the tenant page has no link to its next page:\n%s", page)
	}
}

func maintenancePage(f *fixture) {
	now := at(3 * 3600)
	f.clock.set(now)
	states := []maintenance.TaskState{
		{Name: "compact", Class: maintenance.Heavy, LastRunAt: at(-86400), LastOutcome: maintenance.OutcomeSucceeded,
			Running: true, RunningSince: at(3*3600 - 300), RunningBy: "host-a", RunningToken: 1, RunningUntil: at(3*3600 + 300)},
		{Name: "rollup", Class: maintenance.Heavy, DeferredSince: at(0), DeferredAt: at(3*3600 - 60), Deferrals: 170,
			DeferReason: maintenance.ReasonHeavyBusy, DeferBlocker: "compact"},
		{Name: "vacuum", Class: maintenance.OffLease, LastRunAt: at(3600), LastOutcome: maintenance.OutcomeFailed, LastError: "timeout"},
	}
	if err := f.st.StateStore.Save(f.ctx, 1, states...); err != nil {
		f.t.Fatal(err)
	}
	f.insp.ObservePoll(maintenance.PollReport{Now: at(3*3600 - 60), Result: maintenance.PollResult{
		Deferred: []maintenance.Deferral{{Task: "rollup", Reason: maintenance.ReasonHeavyBusy, Blocker: "compact", Since: at(0)}},
		Gauge:    maintenance.Gauge{At: at(3*3600 - 60), Posture: maintenance.PostureDegraded}}})
	var v maintenanceJSON
	f.getJSON("/api/maintenance", 200, &v)
	if v.Source != "state_store" || v.Error != "" || len(v.Tasks) != 3 || v.Gauge == nil {
		f.fatalf("maintenance %+v; want three tasks and the gauge from the state store", v)
	}
	g := v.Gauge
	if g.Posture != "degraded" || g.Holder != "host-a" || g.HolderTask != "compact" || g.HeldForSeconds != 300 ||
		len(g.Waiters) != 1 || g.Waiters[0].Task != "rollup" || g.Waiters[0].WaitSeconds != 3*3600 ||
		g.Waiters[0].Reason != "heavy-busy" || g.Waiters[0].Blocker != "compact" || g.ChainDepth != 1 {
		f.errorf("gauge %+v; want degraded, compact on host-a for 300 s, rollup waiting 3 h behind it", g)
	}
	if t := v.Tasks[0]; t.Name != "compact" || !t.Running || t.RunningBy != "host-a" || !t.RunningUntil.Equal(at(3*3600+300)) {
		f.errorf("task %+v; want compact running on host-a until now + 300 s", t)
	}
	if t := v.Tasks[2]; t.Name != "vacuum" || t.Class != "off-lease" || t.LastOutcome != "failed" || t.LastError != "timeout" {
		f.errorf("task %+v; want vacuum, off-lease, failed: timeout", t)
	}
	if t := v.Tasks[1]; t.Name != "rollup" || t.WaitSeconds != 3*3600 || t.Deferrals != 170 {
		f.errorf("task %+v; want rollup waiting 3 h over 170 polls", t)
	}
	if p := v.LastPoll; p == nil || len(p.Deferred) != 1 || p.Deferred[0].Task != "rollup" || p.Posture != "degraded" {
		f.errorf("last_poll %+v; want the poll told", p)
	}
	if o := f.overview().Maintenance; o == nil || o.Posture != "degraded" || o.Source != "state_store" || o.Waiters != 1 {
		f.errorf("the overview's maintenance %+v; want degraded, one waiter", o)
	}
	if page := f.getHTML("/maintenance", 200); !strings.Contains(page, "rollup") || !strings.Contains(page, "degraded") {
		f.errorf("the maintenance page lacks the waiter or the posture:\n%s", page)
	}
}
