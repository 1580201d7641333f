package inspecttest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/inspect"
	"github.com/rotaworks/rota/tenancy"
)

// dueNowPath is the due-now action's path for user's entry key.
func dueNowPath(user, key string) string {
	return "/api/tenants/" + url.PathEscape(user) + "/entries/" + url.PathEscape(key) + "/due-now"
}

// later is acme's entry that is due in an hour, with a streak and a last run to keep.
var later = duework.Entry{UserID: "acme", WorkKey: "later", Tier: "cold", DueAt: at(3600), LastRunAt: at(-600), MissStreak: 4}

func dueNow(f *fixture) {
	f.schedule(later)
	now := at(10)
	f.clock.set(now)
	var res actionJSON
	f.postJSON(dueNowPath("acme", "later"), nil, 200, &res)
	if res.Outcome != "scheduled" || res.Action != "due-now" || res.UserID != "acme" || res.WorkKey != "later" ||
		res.Entry == nil || !res.Entry.DueAt.Equal(now) || res.Entry.MissStreak != 4 || res.Entry.Status != "due" {
		f.errorf("due-now answered %+v; want scheduled, the entry due now with its streak", res)
	}
	want := later
	want.DueAt = now
	if got := f.get("acme", "later"); got.Tier != want.Tier || !got.DueAt.Equal(want.DueAt) || !got.LastRunAt.Equal(want.LastRunAt) || got.MissStreak != want.MissStreak {
		f.errorf("after due-now the entry is %+v, want %+v", got, want)
	}
	b := f.dispatch(now)
	dispatched := false
	for _, it := range b.Items {
		dispatched = dispatched || it.Claim.Entry.Key() == later.Key()
	}
	if !dispatched {
		f.errorf("the cycle after due-now dispatched %+v, not acme's later", b.Items)
	}
	if log := f.log.String(); !strings.Contains(log, "inspect: action") || !strings.Contains(log, "outcome=scheduled") || !strings.Contains(log, "work_key=later") {
		f.errorf("the action was not logged: %s", log)
	}
}

func dueNowClaimed(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	c := f.claim("acme", "feed", t0, 5*time.Minute)
	before := f.get("acme", "feed")
	f.clock.set(at(10))
	var res actionJSON
	f.postJSON(dueNowPath("acme", "feed"), nil, 409, &res)
	if res.Outcome != "claimed" || !res.ClaimedUntil.Equal(at(300)) || res.Error == "" {
		f.errorf("due-now on a claimed entry answered %+v; want claimed until t0+300 s", res)
	}
	// The claim is still current, and unstarted: StartClaims starts it.
	tc, _ := tenancy.NewContext("acme")
	if errs, err := f.st.Index.StartClaims(f.ctx, []duework.Unclaim{{Tenant: tc, Claim: c}}); err != nil || errs[0] != nil {
		f.errorf("after the refused due-now StartClaims of the claim = %v, %v; want it current and unstarted", errs, err)
	}
	if got := f.get("acme", "feed"); !got.DueAt.Equal(before.DueAt) || got.MissStreak != before.MissStreak || got.Tier != before.Tier {
		f.errorf("the refused due-now wrote %+v over %+v", got, before)
	}
	if !strings.Contains(f.log.String(), "level=WARN") {
		f.errorf("the refusal was not logged at Warn: %s", f.log)
	}
	// Once the claim has ended, the entry is due (again) and due-now has nothing to do.
	f.clock.set(at(301))
	f.postJSON(dueNowPath("acme", "feed"), nil, 200, &res)
	if res.Outcome != "already_due" {
		f.errorf("due-now after the claim ended answered %+v, want already_due", res)
	}
}

func dueNowAlreadyDue(f *fixture) {
	now := at(10)
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "due", Tier: "hot", DueAt: at(-60), MissStreak: 2})
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "soon", Tier: "hot", DueAt: now.Add(500 * time.Millisecond)})
	f.clock.set(now)
	for _, key := range []string{"due", "soon"} {
		before := f.get("acme", key)
		var res actionJSON
		f.postJSON(dueNowPath("acme", key), nil, 200, &res)
		if res.Outcome != "already_due" || res.Entry == nil || !res.Entry.DueAt.Equal(before.DueAt) || res.Message == "" {
			f.errorf("due-now on %q (due %v) answered %+v; want already_due and a message", key, before.DueAt, res)
		}
		if got := f.get("acme", key); !got.DueAt.Equal(before.DueAt) || got.MissStreak != before.MissStreak {
			f.errorf("due-now on %q wrote %+v over %+v", key, got, before)
		}
	}
}

func dueNowNotFound(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "b", Tier: "hot", DueAt: at(3600)})
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "bc", Tier: "hot", DueAt: at(3600)})
	for _, key := range []string{"a", "ba", "bb", "bd", "c", "b\U0010FFFF"} {
		var res actionJSON
		f.postJSON(dueNowPath("acme", key), nil, 404, &res)
		if res.Outcome != "not_found" {
			f.errorf("due-now on acme's missing %q answered %+v, want not_found", key, res)
		}
	}
	f.postJSON(dueNowPath("nobody", "b"), nil, 404, nil)
	f.postJSON("/api/tenants/acme/entries/%20b/due-now", nil, 400, nil)
	f.postJSON(dueNowPath("acme", "bc"), nil, 200, nil)
	if got := f.get("acme", "b"); !got.DueAt.Equal(at(3600)) {
		f.errorf("due-now on bc moved b to %v", got.DueAt)
	}
}

func reroute(f *fixture) {
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.dispatch(t0) // routes acme to free
	f.setLane("acme", "pro")
	f.clock.set(at(10))
	var res actionJSON
	f.postJSON("/api/tenants/acme/reroute", nil, 200, &res)
	if res.Outcome != "rerouted" || res.Group != "pro" || res.Limits == nil {
		f.errorf("reroute answered %+v; want rerouted to pro", res)
	}
	if st, err := f.st.Index.User(f.ctx, "acme", at(10)); err != nil || st.Group != "pro" {
		f.errorf("after reroute acme is in %q (%v), want pro", st.Group, err)
	}
	f.postJSON("/api/tenants/nobody/reroute", nil, 404, nil)
	f.setLane("acme", "gold") // no such lane: Reroute fails and leaves acme where it is
	f.postJSON("/api/tenants/acme/reroute", nil, 500, &res)
	if res.Outcome != "failed" || res.Error == "" {
		f.errorf("a failed reroute answered %+v, want failed with the error", res)
	}
	if st, _ := f.st.Index.User(f.ctx, "acme", at(10)); st.Group != "pro" {
		f.errorf("a failed reroute moved acme to %q", st.Group)
	}
}

func actionsOff(f *fixture) {
	f.schedule(later)
	ro, err := inspect.New(inspect.Config{Index: f.st.Index, Lanes: lanes, Clock: f.clock, Logger: slog.New(slog.NewTextHandler(f.log, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewServer(ro)
	defer srv.Close()
	f.srv, srv = srv, f.srv
	defer func() { f.srv = srv }()
	f.pauseUser("acme", at(600), "upstream-429")
	for _, path := range []string{dueNowPath("acme", "later"), "/api/tenants/acme/reroute", pausePath("acme", "1h"), resumePath("acme")} {
		f.postJSON(path, nil, 403, nil)
	}
	for _, form := range []url.Values{{"tenant": {"acme"}, "key": {"later"}}, {"tenant": {"acme"}, "for": {"1h"}}, {"tenant": {"acme"}}} {
		for _, action := range []string{"due-now", "pause", "resume"} {
			if r := f.postForm("/actions/"+action, form, nil); r.status != 403 {
				f.errorf("the %s form answered %d with Actions off, want 403", action, r.status)
			}
		}
	}
	if got := f.get("acme", "later"); !got.DueAt.Equal(later.DueAt) {
		f.errorf("a refused due-now moved the entry to %v", got.DueAt)
	}
	if st := f.user("acme", t0); !st.PausedUntil.Equal(at(600)) || st.PauseReason != "upstream-429" {
		f.errorf("a refused pause or resume changed the pause to %v %q", st.PausedUntil, st.PauseReason)
	}
	if page := f.getHTML("/tenants/acme", 200); strings.Contains(page, `method="post"`) {
		f.errorf("the read-only tenant page has a form:\n%s", page)
	}
	if v := f.overview(); v.Actions {
		f.errorf("the read-only overview says actions: true")
	}
}

func crossOrigin(f *fixture) {
	f.schedule(later)
	f.pauseUser("acme", at(600), "upstream-429")
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}} {
		for _, path := range []string{dueNowPath("acme", "later"), pausePath("acme", "24h"), resumePath("acme")} {
			f.postJSON(path, h, 403, nil)
		}
		for _, action := range []string{"due-now", "pause", "resume"} {
			form := url.Values{"tenant": {"acme"}, "key": {"later"}, "for": {"24h"}}
			if r := f.postForm("/actions/"+action, form, h); r.status != 403 {
				f.errorf("a cross-origin %s form POST with %v answered %d, want 403", action, h, r.status)
			}
		}
	}
	if got := f.get("acme", "later"); !got.DueAt.Equal(later.DueAt) {
		f.errorf("a cross-origin POST moved the entry to %v", got.DueAt)
	}
	if st := f.user("acme", t0); !st.PausedUntil.Equal(at(600)) || st.PauseReason != "upstream-429" {
		f.errorf("a cross-origin POST changed the pause to %v %q", st.PausedUntil, st.PauseReason)
	}
	f.postJSON(dueNowPath("acme", "later"), map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": f.srv.URL}, 200, nil)
}

// postForm POSTs a form, as a browser on the Inspector's own page does.
func (f *fixture) postForm(path string, form url.Values, header map[string]string) response {
	f.t.Helper()
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"}
	for k, v := range header {
		h[k] = v
	}
	if header["Origin"] != "" && header["Sec-Fetch-Site"] == "" {
		delete(h, "Sec-Fetch-Site")
	}
	return f.do(http.MethodPost, path, strings.NewReader(form.Encode()), h)
}

// follow resolves a 303's Location against the request and GETs the page it names.
func (f *fixture) follow(r response) string {
	f.t.Helper()
	if r.status != http.StatusSeeOther {
		f.fatalf("answered %d, want 303: %s", r.status, r.body)
	}
	loc, err := r.url.Parse(r.header.Get("Location"))
	if err != nil {
		f.t.Fatal(err)
	}
	return f.getHTML(loc.RequestURI(), 200)
}

func formActions(f *fixture) {
	f.schedule(later)
	f.schedule(duework.Entry{UserID: "acme", WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
	f.claim("acme", "feed", t0, 5*time.Minute)
	f.clock.set(at(10))
	page := f.follow(f.postForm("/actions/due-now", url.Values{"tenant": {"acme"}, "key": {"later"}}, nil))
	if !strings.Contains(page, "is due now") {
		f.errorf("the tenant page after the due-now form does not say so:\n%s", page)
	}
	if got := f.get("acme", "later"); !got.DueAt.Equal(at(10)) {
		f.errorf("the due-now form left the entry due at %v", got.DueAt)
	}
	if page = f.follow(f.postForm("/actions/due-now", url.Values{"tenant": {"acme"}, "key": {"feed"}}, nil)); !strings.Contains(page, "Refused") {
		f.errorf("the tenant page after due-now on a claimed entry does not say it was refused:\n%s", page)
	}
	f.setLane("acme", "pro")
	if page = f.follow(f.postForm("/actions/reroute", url.Values{"tenant": {"acme"}}, nil)); !strings.Contains(page, "re-routed") {
		f.errorf("the tenant page after the reroute form does not say so:\n%s", page)
	}
	if r := f.postForm("/actions/due-now", url.Values{"tenant": {"\x01"}, "key": {"x"}}, nil); r.status != 400 {
		f.errorf("the due-now form with a bad tenant ID answered %d, want 400", r.status)
	}
}
