package inspecttest

import (
	"errors"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// run is one item of a Runner's report: user's source key ran with status, its
// ErrorStreak going from prev to the Next written back, which comes due at next after a
// run that ended at end.
type run struct {
	user, key    string
	status       bridge.ItemStatus
	prev, streak int
	end, next    time.Time
	unwritten    bool
}

// report is a Runner's report at now of runs, in the free lane; a failed run's error
// holds the secret a page may not show.
func report(now time.Time, runs ...run) bridge.CycleReport {
	rep := bridge.CycleReport{Now: now, Dispatched: len(runs)}
	for _, r := range runs {
		e := duework.Entry{UserID: r.user, WorkKey: r.key, Tier: "hot", DueAt: now, ErrorStreak: r.prev}
		it := bridge.ItemReport{Item: dispatch.Item{Lane: "free", Claim: duework.Claim{Entry: e, Until: now.Add(time.Minute)}},
			Status: r.status, Written: !r.unwritten}
		if r.status != bridge.StatusRemoved {
			it.Next = e
			it.Next.ErrorStreak, it.Next.LastRunAt, it.Next.DueAt = r.streak, r.end, r.next
		}
		if r.status == bridge.StatusError {
			it.Err = errors.New("bridge: " + r.user + "/" + r.key + ": pipeline: upstream said 401: " + secret)
			rep.Errors++
		}
		rep.Items = append(rep.Items, it)
	}
	return rep
}

func failingSources(f *fixture) {
	f.insp.ObserveCycle(report(t0,
		run{user: "acme", key: "feed", status: bridge.StatusError, prev: 4, streak: 5, end: t0, next: at(960)},
		run{user: "acme", key: "other", status: bridge.StatusError, prev: 3, streak: 4, end: t0, next: at(480)},
		run{user: "globex", key: "x", status: bridge.StatusError, prev: 7, streak: 8, end: t0, next: at(7680)},
		run{user: "initech", key: "y", status: bridge.StatusError, prev: 8, streak: 9, end: t0, next: at(3600), unwritten: true}))
	f.clock.set(at(1))
	v := f.overview()
	if v.AlarmAfterErrors != bridge.DefaultAlarmAfterErrors || v.FailingSourceCount != 2 || len(v.FailingSources) != 2 {
		f.fatalf("failing_sources %+v (count %d, threshold %d); want acme/feed and globex/x at the default threshold",
			v.FailingSources, v.FailingSourceCount, v.AlarmAfterErrors)
	}
	feed, x := v.FailingSources[0], v.FailingSources[1]
	if feed.UserID != "acme" || feed.WorkKey != "feed" || feed.Lane != "free" || feed.ErrorStreak != 5 || !feed.Since.Equal(t0) ||
		!feed.LastRunAt.Equal(t0) || !feed.NextDue.Equal(at(960)) {
		f.errorf("failing_sources[0] = %+v; want acme/feed in free, streak 5 since t0, next due t0+960 s", feed)
	}
	if x.UserID != "globex" || x.WorkKey != "x" || x.ErrorStreak != 8 {
		f.errorf("failing_sources[1] = %+v; want globex/x, streak 8", x)
	}
	f.checkWithheld("a failing source's error", feed.Error)
	raised := 0
	for _, e := range v.AlarmLog {
		if e.Alarm == "failing_source" && e.Event == "raised" && e.ErrorStreak >= 5 && e.WorkKey != "" {
			raised++
		}
	}
	if raised != 2 {
		f.errorf("alarm_log %+v; want the two failing sources raised", v.AlarmLog)
	}
	page := f.getHTML("/", 200)
	if !strings.Contains(page, "Failing sources") || !strings.Contains(page, `href="./tenants/globex"`) || strings.Contains(page, secret) {
		f.errorf("the overview page does not list the failing sources, or shows their error:\n%s", page)
	}

	// Another failure keeps since; a success of an earlier cycle, told late, changes
	// nothing; a later success drops it, and a removal drops globex's.
	f.insp.ObserveCycle(report(at(60), run{user: "acme", key: "feed", status: bridge.StatusError, prev: 5, streak: 6, end: at(60), next: at(1980)}))
	f.insp.ObserveCycle(report(at(30), run{user: "acme", key: "feed", status: bridge.StatusHit, prev: 5, end: at(30), next: at(90)}))
	v = f.overview()
	if len(v.FailingSources) != 2 || v.FailingSources[0].ErrorStreak != 6 || !v.FailingSources[0].Since.Equal(t0) {
		f.errorf("after a sixth failure and a late success: %+v; want acme/feed at 6 since t0", v.FailingSources)
	}
	f.insp.ObserveCycle(report(at(2000),
		run{user: "acme", key: "feed", status: bridge.StatusMiss, prev: 6, end: at(2000), next: at(2600)},
		run{user: "globex", key: "x", status: bridge.StatusRemoved, prev: 8}))
	f.clock.set(at(2001))
	v = f.overview()
	if v.FailingSourceCount != 0 || len(v.FailingSources) != 0 {
		f.errorf("after acme/feed succeeded and globex/x was removed: %+v; want none", v.FailingSources)
	}
	if e := v.AlarmLog[0]; e.Alarm != "failing_source" || e.Event != "recovered" || e.UserID != "acme" || e.WorkKey != "feed" || !e.At.Equal(at(2000)) {
		f.errorf("alarm_log[0] = %+v; want acme/feed recovered at t0+2000 s", e)
	}
	if len(v.AlarmLog) != 3 {
		f.errorf("alarm_log %+v; want two raises and one recovery (a removal is not one)", v.AlarmLog)
	}
	failingForgotten(f)
}

// failingForgotten checks that a failing source no report tells of again is listed until
// a whole retry interval after its next run was due, and not after.
func failingForgotten(f *fixture) {
	f.insp.ObserveCycle(report(at(3000), run{user: "hooli", key: "z", status: bridge.StatusError, prev: 4, streak: 5, end: at(3000), next: at(3960)}))
	f.clock.set(at(3960 + 960))
	if v := f.overview(); len(v.FailingSources) != 1 {
		f.errorf("a failing source one retry interval overdue: %+v; want it listed", v.FailingSources)
	}
	f.clock.set(at(3960 + 961))
	if v := f.overview(); len(v.FailingSources) != 0 {
		f.errorf("a failing source more than a retry interval overdue, which another process ran: %+v; want it dropped", v.FailingSources)
	}
}
