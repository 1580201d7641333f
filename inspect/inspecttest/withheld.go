package inspecttest

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

// secret is what a database's error might say that no page may: the suite's failing
// stores put it in every error they return.
const secret = "password=hunter2-in-the-dsn"

// errBroken is a failing store's error, worded as a driver's.
var errBroken = errors.New("failed to connect to `host=db.internal user=rota database=prod`: " + secret)

// brokenIndex is the Index the Inspector and the Dispatcher see: it passes every call
// through until broken is set, and then fails every call the Inspector makes.
type brokenIndex struct {
	duework.Index
	broken *atomic.Bool
}

func (b *brokenIndex) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if b.broken.Load() {
		return duework.ReadyPage{}, errBroken
	}
	return b.Index.Ready(ctx, q)
}

func (b *brokenIndex) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	if b.broken.Load() {
		return duework.UserState{}, errBroken
	}
	return b.Index.User(ctx, userID, now)
}

func (b *brokenIndex) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	if b.broken.Load() {
		return nil, errBroken
	}
	return b.Index.Entries(ctx, userID, after, limit)
}

func (b *brokenIndex) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if b.broken.Load() {
		return errBroken
	}
	return b.Index.Schedule(ctx, tc, e)
}

func (b *brokenIndex) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	if b.broken.Load() {
		return nil, errBroken
	}
	return b.Index.Paused(ctx, now, after, limit)
}

func (b *brokenIndex) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if b.broken.Load() {
		return errBroken
	}
	return b.Index.Pause(ctx, tc, until, reason)
}

func (b *brokenIndex) Resume(ctx context.Context, tc tenancy.Context) error {
	if b.broken.Load() {
		return errBroken
	}
	return b.Index.Resume(ctx, tc)
}

// brokenStateStore fails Load once broken is set.
type brokenStateStore struct {
	maintenance.StateStore
	broken *atomic.Bool
}

func (b *brokenStateStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	if b.broken.Load() {
		return maintenance.Snapshot{}, errBroken
	}
	return b.StateStore.Load(ctx)
}

// refRE finds the reference a withheld error's text gives.
var refRE = regexp.MustCompile(`ref ([0-9a-f]{8})\b`)

// checkWithheld checks that text, shown in place of a failing store's error, keeps the
// error's words from the page, gives a reference, and that the log holds the error under
// that reference.
func (f *fixture) checkWithheld(what, text string) {
	f.t.Helper()
	m := refRE.FindStringSubmatch(text)
	switch {
	case strings.Contains(text, secret) || strings.Contains(text, "db.internal"):
		f.errorf("%s shows the store's error: %q", what, text)
	case m == nil:
		f.errorf("%s is %q; want what failed and a reference to the log", what, text)
	default:
		for line := range strings.SplitSeq(f.log.String(), "\n") {
			if strings.Contains(line, "ref="+m[1]) && strings.Contains(line, secret) {
				return
			}
		}
		f.errorf("%s gives ref %s, and no log line holds the error under it:\n%s", what, m[1], f.log.String())
	}
}

// checkPageWithheld checks that an HTML page keeps the store's error to the log.
func (f *fixture) checkPageWithheld(path string, status int) {
	f.t.Helper()
	page := f.getHTML(path, status)
	if strings.Contains(page, secret) || strings.Contains(page, "db.internal") {
		f.errorf("%s shows the store's error:\n%s", path, page)
	}
	if !refRE.MatchString(page) {
		f.errorf("%s gives no reference to the log:\n%s", path, page)
	}
}

func storeErrorsWithheld(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.dispatch(t0)
	f.insp.ObserveCycle(bridge.CycleReport{Now: at(1), DispatchErr: errBroken})
	f.insp.ObservePoll(maintenance.PollReport{Now: at(1), Err: errBroken})
	f.broken.Store(true)
	f.clock.set(at(10))

	v := f.overview()
	for _, l := range v.Lanes {
		f.checkWithheld("lane "+l.Lane+"'s error", l.Error)
	}
	f.checkWithheld("the unrouted group's error", v.UnroutedGroup.Error)
	if v.LastCycle == nil || v.Maintenance == nil {
		f.fatalf("overview %+v; want the last cycle and the maintenance posture", v)
	}
	f.checkWithheld("the last cycle's error", v.LastCycle.Error)
	f.checkWithheld("the maintenance posture's error", v.Maintenance.Error)
	f.checkWithheld("the paused tenants' error", v.PausedError)
	f.checkPageWithheld("/", 200)

	var e errorJSON
	f.getJSON("/api/tenants/acme", 500, &e)
	f.checkWithheld("the tenant page's error", e.Error)
	f.checkPageWithheld("/tenants/acme", 500)
	e = errorJSON{}
	f.getJSON("/api/lanes/free", 500, &e)
	f.checkWithheld("the lane page's error", e.Error)
	f.checkPageWithheld("/lanes/free", 500)
	e = errorJSON{}
	f.getJSON("/api/paused", 500, &e)
	f.checkWithheld("the paused page's error", e.Error)
	f.checkPageWithheld("/paused", 500)

	var m maintenanceJSON
	f.getJSON("/api/maintenance", 200, &m)
	f.checkWithheld("the maintenance page's error", m.Error)
	if m.LastPoll == nil {
		f.fatalf("maintenance %+v; want the last poll", m)
	}
	f.checkWithheld("the last poll's error", m.LastPoll.Error)
	f.checkPageWithheld("/maintenance", 200)

	for _, path := range []string{dueNowPath("acme", "feed"), "/api/tenants/acme/reroute", pausePath("acme", "1h"), resumePath("acme")} {
		var res actionJSON
		f.postJSON(path, nil, 500, &res)
		if res.Outcome != "failed" {
			f.errorf("%s with the index down answered %+v; want failed", path, res)
		}
		f.checkWithheld(path+"'s error", res.Error)
		f.checkWithheld(path+"'s message", res.Message)
	}
}
