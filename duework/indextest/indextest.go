package indextest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// minSequences is the least number of generated operation sequences that the state-machine
// test runs, whatever -rapid.checks says (a larger -rapid.checks runs more).
const minSequences = 1000

// Run checks that the Index implementations returned by newIndex keep the duework.Index
// contract, one subtest per rule. newIndex must return a fresh, empty Index on every call.
func Run(t *testing.T, newIndex func(t *testing.T) duework.Index) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			x := newIndex(t)
			if x == nil {
				t.Fatal("newIndex returned nil")
			}
			r.check(&suite{t: t, x: x, rule: r.text})
		})
	}
	t.Run("StateMachine", func(t *testing.T) { stateMachine(t, newIndex) })
}

// Rules lists the rules Run checks, one line per subtest: its name, a colon, and the rule
// that its failure messages cite.
func Rules() []string {
	out := make([]string, 0, len(rules)+1)
	for _, r := range rules {
		out = append(out, r.name+": "+r.text)
	}
	return append(out, "StateMachine: "+modelRule)
}

// t0 is the suite's fixed instant; every time is t0 plus an offset.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 + d seconds.
func at(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }

// tb is what the helpers need of testing.T and rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// suite is one rule's test: the index under test and the rule that failures cite.
type suite struct {
	t    tb
	x    duework.Index
	rule string
}

var bg = context.Background()

func (s *suite) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

func (s *suite) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("rule %q broken: %s", s.rule, fmt.Sprintf(format, args...))
}

// tenant returns the Context for user.
func tenant(t tb, user string) tenancy.Context {
	t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		t.Fatalf("indextest: tenancy.NewContext(%q): %v", user, err)
	}
	return tc
}

// entry returns user's entry key due at t0 + due seconds.
func entry(user, key string, due int) duework.Entry {
	return duework.Entry{UserID: user, WorkKey: key, Tier: "warm", DueAt: at(due)}
}

func key(user, work string) duework.Key { return duework.Key{UserID: user, WorkKey: work} }

func (s *suite) schedule(es ...duework.Entry) {
	s.t.Helper()
	for _, e := range es {
		if err := s.x.Schedule(bg, tenant(s.t, e.UserID), e); err != nil {
			s.fatalf("Schedule(%s): %v", show(e), err)
		}
	}
}

func (s *suite) get(user, work string) (duework.Entry, error) {
	s.t.Helper()
	return s.x.Get(bg, tenant(s.t, user), work)
}

func (s *suite) dueBefore(now time.Time, limit int) []duework.Entry {
	s.t.Helper()
	es, err := s.x.DueBefore(bg, now, limit)
	if err != nil {
		s.fatalf("DueBefore(%v, %d): %v", now, limit, err)
	}
	return es
}

// ready returns Ready's page for q, failing the rule on an error.
func (s *suite) ready(q duework.ReadyQuery) duework.ReadyPage {
	s.t.Helper()
	p, err := s.x.Ready(bg, q)
	if err != nil {
		s.fatalf("Ready(%s): %v", showQuery(q), err)
	}
	return p
}

// readAll reads the ready, unheld users of group at now, up to 100, one Due entry each,
// holding nothing.
func (s *suite) readAll(group string, now time.Time) []duework.Head {
	s.t.Helper()
	return s.ready(duework.ReadyQuery{Group: group, Now: now, Users: 100, PerUser: 1}).Heads
}

// wantReady fails unless the users of readAll(group, now) are users, in order.
func (s *suite) wantReady(group string, now time.Time, users ...string) {
	s.t.Helper()
	if got := userIDs(s.readAll(group, now)); !slices.Equal(got, users) && len(got)+len(users) > 0 {
		s.errorf("Ready(group %q, t0%+v) read %q, want %q", group, now.Sub(t0), got, users)
	}
}

// head returns user's head among readAll(group, now), and false if it is not there.
func (s *suite) head(group string, now time.Time, user string) (duework.Head, bool) {
	s.t.Helper()
	for _, h := range s.readAll(group, now) {
		if h.UserID == user {
			return h, true
		}
	}
	return duework.Head{}, false
}

func userIDs(hs []duework.Head) []string {
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.UserID
	}
	return ids
}

func (s *suite) claim(now, until time.Time, keys ...duework.Key) []duework.Claim {
	s.t.Helper()
	cs, err := s.x.Claim(bg, keys, now, until)
	if err != nil {
		s.fatalf("Claim(%v, %v, %v): %v", keys, now, until, err)
	}
	return cs
}

// claimOne claims the one key and fails unless it got it.
func (s *suite) claimOne(k duework.Key, now, until time.Time) duework.Claim {
	s.t.Helper()
	cs := s.claim(now, until, k)
	if len(cs) != 1 || cs[0].Entry.Key() != k {
		s.fatalf("Claim(%v) at %v got %s, want a claim of it", k, now, showClaims(cs))
	}
	return cs[0]
}

func (s *suite) unschedule(user, work string) {
	s.t.Helper()
	if err := s.x.Unschedule(bg, tenant(s.t, user), work); err != nil {
		s.fatalf("Unschedule(%s, %s): %v", user, work, err)
	}
}

func (s *suite) route(routes ...duework.Route) {
	s.t.Helper()
	if err := s.x.Route(bg, routes); err != nil {
		s.fatalf("Route(%v): %v", routes, err)
	}
}

func (s *suite) release(heldUntil time.Time, users ...string) {
	s.t.Helper()
	if err := s.x.Release(bg, users, heldUntil); err != nil {
		s.fatalf("Release(%q, t0%+v): %v", users, heldUntil.Sub(t0), err)
	}
}

func (s *suite) complete(c duework.Claim, next duework.Entry) error {
	s.t.Helper()
	return s.x.Complete(bg, tenant(s.t, c.Entry.UserID), c, next)
}

// limit routes user to group with limits l, failing the rule on an error.
func (s *suite) limit(user, group string, l duework.Limits) {
	s.t.Helper()
	s.route(duework.Route{UserID: user, Group: group, Limits: l})
}

// unclaim hands back each claim under its own user's Context and returns the outcomes,
// failing the rule unless the call as a whole succeeds with one outcome per claim.
func (s *suite) unclaim(cs ...duework.Claim) []error {
	s.t.Helper()
	items := make([]duework.Unclaim, len(cs))
	for i, c := range cs {
		items[i] = duework.Unclaim{Tenant: tenant(s.t, c.Entry.UserID), Claim: c}
	}
	errs, err := s.x.Unclaim(bg, items)
	if err != nil || len(errs) != len(cs) {
		s.fatalf("Unclaim of %d claims: %d outcomes, %v", len(cs), len(errs), err)
	}
	return errs
}

// user returns User(id, now), failing the rule on an error.
func (s *suite) user(id string, now time.Time) duework.UserState {
	s.t.Helper()
	st, err := s.x.User(bg, id, now)
	if err != nil {
		s.fatalf("User(%q, t0%+v): %v", id, now.Sub(t0), err)
	}
	return st
}

// wantHead fails unless user is ready in group at now, read with PerUser perUser, with Due
// the entries of the work keys due, More more and InFlight inFlight.
func (s *suite) wantHead(group string, now time.Time, perUser int, user string, due []string, more bool, inFlight int) {
	s.t.Helper()
	q := duework.ReadyQuery{Group: group, Now: now, Users: 100, PerUser: perUser}
	for _, h := range s.ready(q).Heads {
		if h.UserID != user {
			continue
		}
		var got []string
		for _, e := range h.Due {
			got = append(got, e.WorkKey)
		}
		if !slices.Equal(got, due) || h.More != more || h.InFlight != inFlight {
			s.errorf("Ready(%s) reads %s with Due %q, More %v, InFlight %d; want %q, %v, %d", showQuery(q), user, got, h.More, h.InFlight, due, more, inFlight)
		}
		return
	}
	s.errorf("Ready(%s) does not read %s; want it with Due %q", showQuery(q), user, due)
}

// claimed returns the work keys of cs, in order.
func claimedKeys(cs []duework.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Entry.WorkKey
	}
	return out
}

// keysOfUser returns user's keys for the work keys works, in order.
func keysOfUser(user string, works ...string) []duework.Key {
	ks := make([]duework.Key, len(works))
	for i, w := range works {
		ks[i] = key(user, w)
	}
	return ks
}

// micros returns t0 + d seconds + us microseconds.
func micros(d, us int) time.Time { return at(d).Add(time.Duration(us) * time.Microsecond) }

// wantEntry fails unless user's entry work is e.
func (s *suite) wantEntry(user, work string, want duework.Entry) {
	s.t.Helper()
	got, err := s.get(user, work)
	if err != nil {
		s.errorf("Get(%s, %s): %v, want %s", user, work, err, show(want))
		return
	}
	if !sameEntry(got, want) {
		s.errorf("Get(%s, %s) = %s, want %s", user, work, show(got), show(want))
	}
}

// wantAbsent fails unless Get of user's entry work is ErrNotFound.
func (s *suite) wantAbsent(user, work string) {
	s.t.Helper()
	got, err := s.get(user, work)
	if !errors.Is(err, duework.ErrNotFound) {
		s.errorf("Get(%s, %s) = %s, %v; want duework.ErrNotFound", user, work, show(got), err)
	}
}

// wantDue fails unless DueBefore(now, 1000) returns exactly the keys, in order.
func (s *suite) wantDue(now time.Time, keys ...duework.Key) {
	s.t.Helper()
	got := keysOf(s.dueBefore(now, 1000))
	if !slices.Equal(got, keys) && len(got)+len(keys) > 0 {
		s.errorf("DueBefore(t0%+v) returned %v, want %v", now.Sub(t0), got, keys)
	}
}

func keysOf(es []duework.Entry) []duework.Key {
	ks := make([]duework.Key, len(es))
	for i, e := range es {
		ks[i] = e.Key()
	}
	return ks
}

// sameEntry compares entries field by field, times with Equal.
func sameEntry(a, b duework.Entry) bool {
	return a.UserID == b.UserID && a.WorkKey == b.WorkKey && a.Tier == b.Tier &&
		a.DueAt.Equal(b.DueAt) && a.LastRunAt.Equal(b.LastRunAt) && a.MissStreak == b.MissStreak &&
		a.ErrorStreak == b.ErrorStreak
}

func sameEntries(a, b []duework.Entry) bool { return slices.EqualFunc(a, b, sameEntry) }

func sameHeads(a, b []duework.Head) bool {
	return slices.EqualFunc(a, b, func(x, y duework.Head) bool {
		return x.UserID == y.UserID && x.LastServed.Equal(y.LastServed) && x.Turn.Equal(y.Turn) && x.More == y.More && sameEntries(x.Due, y.Due) &&
			x.Limits == y.Limits && x.InFlight == y.InFlight
	})
}

// show formats an entry with times as offsets from t0.
func show(e duework.Entry) string {
	last := "never"
	if !e.LastRunAt.IsZero() {
		last = "t0" + fmt.Sprintf("%+v", e.LastRunAt.Sub(t0))
	}
	errs := ""
	if e.ErrorStreak != 0 {
		errs = fmt.Sprintf(" errors %d", e.ErrorStreak)
	}
	return fmt.Sprintf("{%s/%s %s due t0%+v last %s streak %d%s}", e.UserID, e.WorkKey, e.Tier, e.DueAt.Sub(t0), last, e.MissStreak, errs)
}

func showAll(es []duework.Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = show(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func showHeads(hs []duework.Head) string {
	var b strings.Builder
	b.WriteString("[")
	for i, h := range hs {
		if i > 0 {
			b.WriteString(" ")
		}
		served := "never"
		if !h.LastServed.IsZero() {
			served = fmt.Sprintf("t0%+v", h.LastServed.Sub(t0))
		}
		fmt.Fprintf(&b, "%s(served %s turn t0%+v more %v", h.UserID, served, h.Turn.Sub(t0), h.More)
		if h.Limits != (duework.Limits{}) || h.InFlight != 0 {
			fmt.Fprintf(&b, " limits %+v in flight %d", h.Limits, h.InFlight)
		}
		fmt.Fprintf(&b, " %s)", showAll(h.Due))
	}
	b.WriteString("]")
	return b.String()
}

func showClaims(cs []duework.Claim) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s#%d until t0%+v", show(c.Entry), c.Token, c.Until.Sub(t0))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// sortDue orders entries as DueBefore must: (DueAt, UserID, WorkKey).
func sortDue(es []duework.Entry) {
	slices.SortFunc(es, func(a, b duework.Entry) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), strings.Compare(a.UserID, b.UserID), strings.Compare(a.WorkKey, b.WorkKey))
	})
}

func samePage(a, b duework.ReadyPage) bool {
	return a.Next.Equal(b.Next) && sameHeads(a.Heads, b.Heads)
}

func showPage(p duework.ReadyPage) string {
	next := "none"
	if !p.Next.IsZero() {
		next = fmt.Sprintf("t0%+v", p.Next.Sub(t0))
	}
	return fmt.Sprintf("%s next %s", showHeads(p.Heads), next)
}

func showQuery(q duework.ReadyQuery) string {
	return fmt.Sprintf("{group %q now t0%+v users %d perUser %d hold %v}", q.Group, q.Now.Sub(t0), q.Users, q.PerUser, q.Hold)
}
