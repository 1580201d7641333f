package inspecttest

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// pausePath is the pause action's path for user, for the duration d.
func pausePath(user, d string) string {
	return "/api/tenants/" + url.PathEscape(user) + "/pause?" + url.Values{"for": {d}}.Encode()
}

// resumePath is the resume action's path for user.
func resumePath(user string) string { return "/api/tenants/" + url.PathEscape(user) + "/resume" }

// pauseUser pauses user in the index directly, as a pushback does.
func (f *fixture) pauseUser(user string, until time.Time, reason string) {
	f.t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.st.Index.Pause(f.ctx, tc, until, reason); err != nil {
		f.t.Fatalf("Pause(%q, %v, %q): %v", user, until, reason, err)
	}
}

// user reads user's state at now, failing the test on error.
func (f *fixture) user(user string, now time.Time) duework.UserState {
	f.t.Helper()
	st, err := f.st.Index.User(f.ctx, user, now)
	if err != nil {
		f.t.Fatalf("User(%q): %v", user, err)
	}
	return st
}

// served reports whether batch dispatched any item of user.
func served(b dispatch.Batch, user string) bool {
	return slices.ContainsFunc(b.Items, func(it dispatch.Item) bool { return it.Claim.Entry.UserID == user })
}

func tenantPause(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.pauseUser("acme", at(600), "upstream-429")
	f.clock.set(at(30))
	var v tenantJSON
	f.getJSON("/api/tenants/acme", 200, &v)
	st := f.user("acme", at(30))
	if !v.PausedUntil.Equal(at(600)) || !v.PausedUntil.Equal(st.PausedUntil) || v.PauseReason != "upstream-429" ||
		v.PauseReason != st.PauseReason || v.PauseLeft != 570 || v.Ready {
		f.errorf("tenant %+v; want paused until t0+600 s for upstream-429, 570 s left, not ready (User says %v, %q)", v, st.PausedUntil, st.PauseReason)
	}
	page := f.getHTML("/tenants/acme", 200)
	for _, s := range []string{"Paused", "upstream-429", `action="../actions/resume"`, "9m30s left"} {
		if !strings.Contains(page, s) {
			f.errorf("the tenant page of a paused tenant lacks %q:\n%s", s, page)
		}
	}
	// Once the pause has ended, the page shows none.
	f.clock.set(at(600))
	v = tenantJSON{}
	f.getJSON("/api/tenants/acme", 200, &v)
	if !v.PausedUntil.IsZero() || v.PauseReason != "" || v.PauseLeft != 0 || !v.Ready {
		f.errorf("after the pause ended: %+v; want no pause, ready", v)
	}
	if page := f.getHTML("/tenants/acme", 200); strings.Contains(page, "upstream-429") || strings.Contains(page, "actions/resume") {
		f.errorf("the tenant page still shows the ended pause:\n%s", page)
	}
}

func errorStreaks(f *fixture) {
	streaks := map[string]int{"a": 0, "b": 4, "c": 5, "d": 9}
	for key, n := range streaks {
		f.schedule(duework.Entry{UserID: "acme", WorkKey: key, Tier: "hot", DueAt: at(600), LastRunAt: at(-60), ErrorStreak: n, MissStreak: 2})
	}
	var v tenantJSON
	f.getJSON("/api/tenants/acme", 200, &v)
	if len(v.Entries) != len(streaks) {
		f.fatalf("entries %+v, want %d", v.Entries, len(streaks))
	}
	for _, e := range v.Entries {
		// The suite's Inspector has the default AlarmAfterErrors, 5.
		if want := streaks[e.WorkKey]; e.ErrorStreak != want || e.Failing != (want >= bridge.DefaultAlarmAfterErrors) || e.MissStreak != 2 {
			f.errorf("entry %+v; want error_streak %d, miss_streak 2, failing %v", e, want, want >= bridge.DefaultAlarmAfterErrors)
		}
	}
	if page := f.getHTML("/tenants/acme", 200); !strings.Contains(page, "error streak") || strings.Count(page, "failing</small>") != 2 {
		f.errorf("the tenant page does not show the error streaks with two failing entries:\n%s", page)
	}
	// Due-now keeps the error streak.
	var res actionJSON
	f.postJSON(dueNowPath("acme", "d"), nil, 200, &res)
	if res.Entry == nil || res.Entry.ErrorStreak != 9 || f.get("acme", "d").ErrorStreak != 9 {
		f.errorf("due-now answered %+v; want the error streak 9 kept", res.Entry)
	}
}

func pauseResume(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.schedule(duework.Entry{UserID: "globex", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.clock.set(at(10))
	post := func(path string) actionJSON { // a fresh answer each time: omitted fields stay zero
		f.t.Helper()
		var res actionJSON
		f.postJSON(path, nil, 200, &res)
		return res
	}
	res := post(pausePath("acme", "1h"))
	if res.Action != "pause" || res.Outcome != "paused" || !res.PausedUntil.Equal(at(3610)) || res.PauseReason != "operator" || res.Message == "" {
		f.errorf("pause for 1h answered %+v; want paused until t0+3610 s for operator", res)
	}
	if st := f.user("acme", at(10)); !st.PausedUntil.Equal(at(3610)) || st.PauseReason != "operator" {
		f.errorf("after pause, User says paused until %v for %q; want t0+3610 s, operator", st.PausedUntil, st.PauseReason)
	}
	// The pause is in the index: the Dispatcher, which the Inspector did not touch, serves
	// the other tenant and not acme.
	if b := f.dispatch(at(20)); served(b, "acme") || !served(b, "globex") {
		f.errorf("the cycle after the pause dispatched %+v; want globex's and none of acme's", b.Items)
	}
	// A shorter pause never shortens it; a longer one extends it; seconds work too.
	res = post(pausePath("acme", "30m"))
	if res.Outcome != "already_paused" || !res.PausedUntil.Equal(at(3610)) {
		f.errorf("pause for 30m over a 1h pause answered %+v; want already_paused until t0+3610 s", res)
	}
	res = post(pausePath("acme", "7200"))
	if res.Outcome != "paused" || !res.PausedUntil.Equal(at(7210)) {
		f.errorf("pause for 7200 (seconds) answered %+v; want paused until t0+7210 s", res)
	}
	if log := f.log.String(); !strings.Contains(log, "action=pause") || !strings.Contains(log, "outcome=paused") || !strings.Contains(log, "pause_reason=operator") {
		f.errorf("the pause was not logged: %s", log)
	}
	res = post(resumePath("acme"))
	if res.Action != "resume" || res.Outcome != "resumed" || !res.PausedUntil.IsZero() || !strings.Contains(res.Message, "operator") {
		f.errorf("resume answered %+v; want resumed, naming the pause it ended", res)
	}
	if st := f.user("acme", at(10)); !st.PausedUntil.IsZero() {
		f.errorf("after resume, User says paused until %v", st.PausedUntil)
	}
	if b := f.dispatch(at(30)); !served(b, "acme") {
		f.errorf("the cycle after the resume dispatched %+v; want acme's", b.Items)
	}
	res = post(resumePath("acme"))
	if res.Outcome != "not_paused" {
		f.errorf("resume of a tenant not paused answered %+v; want not_paused", res)
	}
	// A pushback's longer pause stands, with its reason.
	f.pauseUser("acme", at(86400), "upstream-429")
	res = post(pausePath("acme", "1h"))
	if res.Outcome != "already_paused" || !res.PausedUntil.Equal(at(86400)) || res.PauseReason != "upstream-429" {
		f.errorf("pause for 1h over a pushback's day answered %+v; want already_paused until t0+86400 s, upstream-429", res)
	}
	pauseRefused(f)
}

// pauseRefused checks that the pause and resume actions refuse bad input and unknown
// tenants, writing nothing.
func pauseRefused(f *fixture) {
	before := f.user("acme", at(10))
	for _, d := range []string{"", "0", "0s", "-5m", "500ms", "721h", "2592001", "abc", "NaN", "Inf", "1e400", "1h 2m"} {
		var res actionJSON
		f.postJSON(pausePath("acme", d), nil, 400, &res)
		if res.Outcome != "invalid" || res.Error == "" {
			f.errorf("pause for %q answered %+v; want invalid", d, res)
		}
	}
	if st := f.user("acme", at(10)); !st.PausedUntil.Equal(before.PausedUntil) || st.PauseReason != before.PauseReason {
		f.errorf("refused pauses changed acme's pause to %v %q", st.PausedUntil, st.PauseReason)
	}
	f.postJSON(pausePath("acme", "720h"), nil, 200, nil)
	for _, path := range []string{pausePath("ghost", "1h"), resumePath("ghost")} {
		var res actionJSON
		f.postJSON(path, nil, 404, &res)
		if res.Outcome != "not_found" {
			f.errorf("%s answered %+v; want not_found", path, res)
		}
	}
	if _, err := f.st.Index.User(f.ctx, "ghost", at(10)); !errors.Is(err, duework.ErrNotFound) {
		f.errorf("a refused pause of an unknown tenant stored it: User = %v", err)
	}
	f.postJSON("/api/tenants/%20x/pause?for=1h", nil, 400, nil)
	f.postJSON("/api/tenants/%01/resume", nil, 400, nil)
}

func pauseForms(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.clock.set(at(10))
	if page := f.getHTML("/tenants/acme", 200); !strings.Contains(page, `action="../actions/pause"`) || strings.Contains(page, "actions/resume") {
		f.errorf("the page of a tenant not paused lacks the pause form, or has a resume form:\n%s", page)
	}
	page := f.follow(f.postForm("/actions/pause", url.Values{"tenant": {"acme"}, "for": {"90m"}}, nil))
	if !strings.Contains(page, "Tenant paused") || !strings.Contains(page, "operator") || !strings.Contains(page, "actions/resume") {
		f.errorf("the tenant page after the pause form does not show the pause:\n%s", page)
	}
	if st := f.user("acme", at(10)); !st.PausedUntil.Equal(at(10 + 90*60)) {
		f.errorf("the pause form paused acme until %v, want t0+5410 s", st.PausedUntil)
	}
	if page = f.follow(f.postForm("/actions/pause", url.Values{"tenant": {"acme"}, "for": {"1m"}}, nil)); !strings.Contains(page, "A pause that ends later stands") {
		f.errorf("the tenant page after a shorter pause does not say the longer one stands:\n%s", page)
	}
	if page = f.follow(f.postForm("/actions/resume", url.Values{"tenant": {"acme"}}, nil)); !strings.Contains(page, "Tenant resumed") {
		f.errorf("the tenant page after the resume form does not say so:\n%s", page)
	}
	if r := f.postForm("/actions/pause", url.Values{"tenant": {"acme"}, "for": {"forever"}}, nil); r.status != 400 || !strings.Contains(string(r.body), "for must be") {
		f.errorf("the pause form with a bad duration answered %d, want 400 saying why: %s", r.status, r.body)
	}
}

func pausedPaging(f *fixture) {
	var want []string
	for k := range 25 {
		id := fmt.Sprintf("p-%02d", k)
		want = append(want, id)
		f.pauseUser(id, at(600+k), "upstream-429")
	}
	f.pauseUser("p-ended", at(5), "upstream-503")
	f.clock.set(at(10))
	v := f.overview()
	if len(v.Paused) != 20 || v.PausedNext != "p-19" || v.PausedError != "" {
		f.fatalf("the overview's paused %+v, next %q; want the first 20, next p-19", v.Paused, v.PausedNext)
	}
	if p := v.Paused[3]; p.UserID != "p-03" || p.Reason != "upstream-429" || !p.Until.Equal(at(603)) || p.LeftSeconds != 593 {
		f.errorf("paused[3] = %+v; want p-03 until t0+603 s, 593 s left, upstream-429", p)
	}
	var got []string
	after := ""
	for range 10 {
		var pv pausedViewJSON
		path := "/api/paused?limit=7"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		f.getJSON(path, 200, &pv)
		if pv.After != after || len(pv.Paused) > 7 || !pv.Now.Equal(at(10)) {
			f.errorf("%s: after %q, %d paused", path, pv.After, len(pv.Paused))
		}
		for _, p := range pv.Paused {
			got = append(got, p.UserID)
		}
		if pv.Next == "" {
			break
		}
		after = pv.Next
	}
	if !slices.Equal(got, want) {
		f.errorf("/api/paused pages through %v, want %v (the ended pause left out)", got, want)
	}
	var rest pausedViewJSON
	f.getJSON("/api/paused?after="+v.PausedNext, 200, &rest)
	if len(rest.Paused) != 5 || rest.Paused[0].UserID != "p-20" || rest.Next != "" {
		f.errorf("/api/paused after the overview's next: %+v; want p-20 … p-24", rest.Paused)
	}
	for _, path := range []string{"/api/paused?limit=0", "/api/paused?limit=501", "/api/paused?after=%20x"} {
		f.getJSON(path, 400, nil)
	}
	if page := f.getHTML("/", 200); !strings.Contains(page, "Paused tenants") || !strings.Contains(page, `href="./tenants/p-00"`) ||
		!strings.Contains(page, `href="./paused?after=p-19"`) {
		f.errorf("the overview page does not list the paused tenants with a link to the rest:\n%s", page)
	}
	if page := f.getHTML("/paused?limit=10", 200); !strings.Contains(page, "p-09") || strings.Contains(page, "p-10<") ||
		!strings.Contains(page, "after=p-09") {
		f.errorf("the paused page does not show its first 10 with a link to the next:\n%s", page)
	}
}
