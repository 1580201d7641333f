package indextest

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// The rules of bad input.

// badCase is one call that must fail with want, its message naming field
// (case-insensitively; "" for tenancy.ErrNoTenant).
type badCase struct {
	what  string
	want  error
	field string
	call  func() error
}

// refused fails for every case that does not fail as it should.
func (s *suite) refused(cases []badCase) {
	s.t.Helper()
	for _, c := range cases {
		err := c.call()
		switch {
		case !errors.Is(err, c.want):
			s.errorf("%s: %v, want %v", c.what, err, c.want)
		case !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.field)):
			s.errorf("%s: the error %q does not name the field %s", c.what, err, c.field)
		}
	}
}

var (
	long     = strings.Repeat("x", tenancy.MaxIDLength+1)
	tooEarly = vocab.MinTime.Add(-time.Nanosecond)
	tooLate  = vocab.MaxTime.Add(time.Nanosecond)
	// The extremes an Index keeps exactly: the suite's times are whole microseconds.
	earliest = vocab.MinTime.Add(time.Microsecond)
	latest   = vocab.MaxTime.Truncate(time.Microsecond)
)

// invalidEntries are the ways an Entry is invalid, each with the field its error names.
var invalidEntries = []struct {
	what, field string
	change      func(e *duework.Entry)
}{
	{"an empty WorkKey", "WorkKey", func(e *duework.Entry) { e.WorkKey = "" }},
	{"a WorkKey with a NUL", "WorkKey", func(e *duework.Entry) { e.WorkKey = "a\x00" }},
	{"a WorkKey with a newline", "WorkKey", func(e *duework.Entry) { e.WorkKey = "a\nb" }},
	{"a WorkKey not UTF-8", "WorkKey", func(e *duework.Entry) { e.WorkKey = "\xff" }},
	{"a WorkKey too long", "WorkKey", func(e *duework.Entry) { e.WorkKey = long }},
	{"a Tier with an escape sequence", "Tier", func(e *duework.Entry) { e.Tier = "hot\x1b[2J" }},
	{"a Tier not UTF-8", "Tier", func(e *duework.Entry) { e.Tier = "h\xffot" }},
	{"a Tier too long", "Tier", func(e *duework.Entry) { e.Tier = long }},
	{"a zero DueAt", "DueAt", func(e *duework.Entry) { e.DueAt = time.Time{} }},
	{"a DueAt before year 1", "DueAt", func(e *duework.Entry) { e.DueAt = tooEarly }},
	{"a DueAt after year 9999", "DueAt", func(e *duework.Entry) { e.DueAt = tooLate }},
	{"a LastRunAt before year 1", "LastRunAt", func(e *duework.Entry) { e.LastRunAt = tooEarly }},
	{"a LastRunAt after year 9999", "LastRunAt", func(e *duework.Entry) { e.LastRunAt = tooLate }},
	{"a negative MissStreak", "MissStreak", func(e *duework.Entry) { e.MissStreak = -1 }},
	{"a MissStreak past MaxMissStreak", "MissStreak", func(e *duework.Entry) { e.MissStreak = duework.MaxMissStreak + 1 }},
	{"a negative ErrorStreak", "ErrorStreak", func(e *duework.Entry) { e.ErrorStreak = -1 }},
	{"an ErrorStreak past MaxMissStreak", "ErrorStreak", func(e *duework.Entry) { e.ErrorStreak = duework.MaxMissStreak + 1 }},
	{"the UserID of another user", "UserID", func(e *duework.Entry) { e.UserID = "bo" }},
}

// badEntryCases are the calls that take an Entry, with each bad Entry and with the zero
// Context; c is a current claim of seed.
func (s *suite) badEntryCases(seed duework.Entry, c duework.Claim) []badCase {
	amy := tenant(s.t, seed.UserID)
	ms := s.x
	var cases []badCase
	add := func(what string, want error, field string, e duework.Entry, tc tenancy.Context) {
		if e.WorkKey != "other" { // a valid Entry, bad only as a claim's next
			cases = append(cases, badCase{"Schedule of " + what, want, field, func() error { return s.x.Schedule(bg, tc, e) }})
		}
		cases = append(cases,
			badCase{"Complete with a next with " + what, want, field, func() error { return s.x.Complete(bg, tc, c, e) }},
			badCase{"CompleteMany of an item with " + what, want, field, func() error {
				errs, err := s.x.CompleteMany(bg, []duework.Done{{Tenant: tc, Claim: c, Next: e}})
				if err != nil || len(errs) != 1 {
					return errors.Join(errors.New("CompleteMany failed as a whole"), err)
				}
				return errs[0]
			}})
		if e.WorkKey != "other" {
			cases = append(cases, badCase{"ScheduleMissing of " + what, want, field, func() error {
				_, err := ms.ScheduleMissing(bg, tc, []duework.Entry{entry(seed.UserID, "fine", 0), e})
				return err
			}})
		}
	}
	for _, b := range invalidEntries {
		e := seed
		b.change(&e)
		add(b.what, duework.ErrInvalid, b.field, e, amy)
	}
	add("the zero Context", tenancy.ErrNoTenant, "", seed, tenancy.Context{})
	other := seed
	other.WorkKey = "other"
	add("a WorkKey not the claim's", duework.ErrInvalid, "WorkKey", other, amy)
	forged := c
	forged.Entry.UserID = "bo"
	return append(cases, badCase{"Complete of a claim naming another user", duework.ErrInvalid, "UserID", func() error {
		return s.x.Complete(bg, amy, forged, seed)
	}})
}

// wantUnchanged fails unless the index holds exactly seed, claimed by c, and bo's x due at
// t0 in the unrouted group, unheld.
func (s *suite) wantUnchanged(seed duework.Entry, c duework.Claim) {
	s.t.Helper()
	s.wantEntry(seed.UserID, seed.WorkKey, seed)
	s.wantAbsent(seed.UserID, "other")
	s.wantAbsent(seed.UserID, "fine")
	s.wantAbsent("bo", seed.WorkKey)
	s.wantDue(at(5), key("bo", "x"))
	s.wantReady("", at(5), "bo")
	if err := s.complete(c, entry(seed.UserID, seed.WorkKey, 50)); err != nil {
		s.errorf("Complete after the bad calls: %v, want nil", err)
	}
}

func badEntries(s *suite) {
	seed := entry("amy", "a", 0)
	s.schedule(seed, entry("bo", "x", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.refused(s.badEntryCases(seed, c))
	s.wantUnchanged(seed, c)
}

// badArgumentCases are the calls with a bad time, limit, Hold, group name, work key or
// user ID.
func (s *suite) badArgumentCases() []badCase {
	amy := tenant(s.t, "amy")
	ready := func(q duework.ReadyQuery) func() error {
		return func() error { _, err := s.x.Ready(bg, q); return err }
	}
	q := func(change func(q *duework.ReadyQuery)) duework.ReadyQuery {
		q := duework.ReadyQuery{Now: at(0), Users: 5, PerUser: 5, Hold: time.Minute}
		change(&q)
		return q
	}
	dueBefore := func(now time.Time, limit int) func() error {
		return func() error { _, err := s.x.DueBefore(bg, now, limit); return err }
	}
	claim := func(now, until time.Time) func() error {
		return func() error { _, err := s.x.Claim(bg, []duework.Key{key("bo", "x")}, now, until); return err }
	}
	inv := duework.ErrInvalid
	cases := []badCase{
		{"DueBefore with now before year 1", inv, "now", dueBefore(tooEarly, 5)},
		{"DueBefore with now after year 9999", inv, "now", dueBefore(tooLate, 5)},
		{"DueBefore with limit 0", inv, "limit", dueBefore(at(100), 0)},
		{"DueBefore with limit -1", inv, "limit", dueBefore(at(100), -1)},
		{"DueBefore with limit MaxLimit+1", inv, "limit", dueBefore(at(100), duework.MaxLimit+1)},
		{"Ready with Now before year 1", inv, "Now", ready(q(func(q *duework.ReadyQuery) { q.Now = tooEarly }))},
		{"Ready with Now after year 9999", inv, "Now", ready(q(func(q *duework.ReadyQuery) { q.Now, q.Hold = tooLate, 0 }))},
		{"Ready with Now+Hold after year 9999", inv, "Hold", ready(q(func(q *duework.ReadyQuery) { q.Now = latest }))},
		{"Ready with a negative Hold", inv, "Hold", ready(q(func(q *duework.ReadyQuery) { q.Hold = -time.Second }))},
		{"Ready with Users 0", inv, "Users", ready(q(func(q *duework.ReadyQuery) { q.Users = 0 }))},
		{"Ready with Users MaxLimit+1", inv, "Users", ready(q(func(q *duework.ReadyQuery) { q.Users = duework.MaxLimit + 1 }))},
		{"Ready with PerUser 0", inv, "PerUser", ready(q(func(q *duework.ReadyQuery) { q.PerUser = 0 }))},
		{"Ready with PerUser -3", inv, "PerUser", ready(q(func(q *duework.ReadyQuery) { q.PerUser = -3 }))},
		{"Ready with PerUser MaxLimit+1", inv, "PerUser", ready(q(func(q *duework.ReadyQuery) { q.PerUser = duework.MaxLimit + 1 }))},
		{"Groups with now after year 9999", inv, "now", func() error { _, err := s.x.Groups(bg, tooLate); return err }},
		{"Groups with now before year 1", inv, "now", func() error { _, err := s.x.Groups(bg, tooEarly); return err }},
		{"Release with heldUntil after year 9999", inv, "heldUntil", func() error { return s.x.Release(bg, []string{"bo"}, tooLate) }},
		{"Release with heldUntil before year 1", inv, "heldUntil", func() error { return s.x.Release(bg, []string{"bo"}, tooEarly) }},
		{"Claim with now before year 1", inv, "now", claim(tooEarly, at(100))},
		{"Claim with until after year 9999", inv, "until", claim(at(0), tooLate)},
		{"Claim with until equal to now", inv, "until", claim(at(100), at(100))},
		{"Claim with until before now", inv, "until", claim(at(100), at(50))},
		{"Unschedule with the zero Context", tenancy.ErrNoTenant, "", func() error { return s.x.Unschedule(bg, tenancy.Context{}, "a") }},
		{"Get with the zero Context", tenancy.ErrNoTenant, "", func() error { _, err := s.x.Get(bg, tenancy.Context{}, "a"); return err }},
		{"User with now after year 9999", inv, "now", func() error { _, err := s.x.User(bg, "amy", tooLate); return err }},
		{"User with now before year 1", inv, "now", func() error { _, err := s.x.User(bg, "amy", tooEarly); return err }},
		{"Entries with limit 0", inv, "limit", func() error { _, err := s.x.Entries(bg, "amy", "", 0); return err }},
		{"Entries with limit MaxLimit+1", inv, "limit", func() error { _, err := s.x.Entries(bg, "amy", "", duework.MaxLimit+1); return err }},
		{"Entries after a bad work key", inv, "after", func() error { _, err := s.x.Entries(bg, "amy", "a\x00", 5); return err }},
	}
	cases = append(cases, s.badPauseCases()...)
	for _, id := range []string{"", "a\x00", "\xff", " amy", long} {
		cases = append(cases,
			badCase{"User of user ID " + id[:min(len(id), 9)], inv, "UserID", func() error { _, err := s.x.User(bg, id, at(0)); return err }},
			badCase{"Entries of user ID " + id[:min(len(id), 9)], inv, "UserID", func() error { _, err := s.x.Entries(bg, id, "", 5); return err }})
	}
	for _, name := range []string{"\x00", "bad\nname", "\xff", long} {
		cases = append(cases,
			badCase{"Ready of group " + name[:min(len(name), 9)], inv, "Group", ready(q(func(q *duework.ReadyQuery) { q.Group = name }))},
			badCase{"Route to group " + name[:min(len(name), 9)], inv, "Group", func() error {
				return s.x.Route(bg, []duework.Route{{UserID: "bo", Group: "pro"}, {UserID: "amy", Group: name}})
			}})
	}
	for _, work := range []string{"", "a\x00", "\xff", long} {
		cases = append(cases,
			badCase{"Get of work key " + work[:min(len(work), 9)], inv, "WorkKey", func() error { _, err := s.x.Get(bg, amy, work); return err }},
			badCase{"Unschedule of work key " + work[:min(len(work), 9)], inv, "WorkKey", func() error { return s.x.Unschedule(bg, amy, work) }})
	}
	return cases
}

func badArguments(s *suite) {
	seed := entry("amy", "a", 0)
	s.schedule(seed, entry("bo", "x", 0))
	c := s.claimOne(key("amy", "a"), at(0), at(10))
	s.refused(s.badArgumentCases())
	s.wantUnchanged(seed, c)
	// No bad Pause paused or stored anyone.
	s.wantPaused(at(0), "", duework.MaxLimit)
	if _, err := s.x.User(bg, "carl", at(0)); !errors.Is(err, duework.ErrNotFound) {
		s.errorf("User(carl) after bad Pauses of carl only: %v, want duework.ErrNotFound", err)
	}
}

// badPauseCases are the calls of Pause, Resume and Paused with a bad argument. The Pauses
// are carl's, whom the index does not store.
func (s *suite) badPauseCases() []badCase {
	carl := tenant(s.t, "carl")
	pause := func(tc tenancy.Context, until time.Time, reason string) func() error {
		return func() error { return s.x.Pause(bg, tc, until, reason) }
	}
	paused := func(now time.Time, after string, limit int) func() error {
		return func() error { _, err := s.x.Paused(bg, now, after, limit); return err }
	}
	inv := duework.ErrInvalid
	cases := []badCase{
		{"Pause with the zero Context", tenancy.ErrNoTenant, "", pause(tenancy.Context{}, at(10), "operator")},
		{"Pause until the zero time", inv, "until", pause(carl, time.Time{}, "operator")},
		{"Pause until before year 1", inv, "until", pause(carl, tooEarly, "operator")},
		{"Pause until after year 9999", inv, "until", pause(carl, tooLate, "operator")},
		{"Resume with the zero Context", tenancy.ErrNoTenant, "", func() error { return s.x.Resume(bg, tenancy.Context{}) }},
		{"Paused with now before year 1", inv, "now", paused(tooEarly, "", 5)},
		{"Paused with now after year 9999", inv, "now", paused(tooLate, "", 5)},
		{"Paused with limit 0", inv, "limit", paused(at(0), "", 0)},
		{"Paused with limit -1", inv, "limit", paused(at(0), "", -1)},
		{"Paused with limit MaxLimit+1", inv, "limit", paused(at(0), "", duework.MaxLimit+1)},
	}
	for _, bad := range []string{"", "a\x00", "bad\nreason", "\xff", long} {
		cases = append(cases, badCase{"Pause with reason " + bad[:min(len(bad), 9)], inv, "reason", pause(carl, at(10), bad)})
	}
	for _, bad := range []string{"a\x00", "\xff", " amy", long} {
		cases = append(cases, badCase{"Paused after " + bad[:min(len(bad), 9)], inv, "after", paused(at(0), bad, 5)})
	}
	return cases
}

func invalidKeysSkipped(s *suite) {
	s.schedule(entry("amy", "a", 0), entry("bo", "b", 0))
	keys := []duework.Key{
		key("amy", ""), key("amy", "a\x00"), key("", "a"), key("bo\x00", "b"), key("amy", "a"),
		key("amy", long), key("\xff", "a"), key(long, "b"), key("bo", "b\n"), key("bo", "b"),
	}
	cs, err := s.x.Claim(bg, keys, at(0), at(10))
	if err != nil {
		s.fatalf("Claim with invalid keys among valid ones: %v, want nil", err)
	}
	if got, want := keysOf(claimEntries(cs)), []duework.Key{key("amy", "a"), key("bo", "b")}; !slices.Equal(got, want) {
		s.errorf("Claim with invalid keys among valid ones claimed %v, want %v", got, want)
	}
}

func claimEntries(cs []duework.Claim) []duework.Entry {
	es := make([]duework.Entry, len(cs))
	for i, c := range cs {
		es[i] = c.Entry
	}
	return es
}

func bounds(s *suite) {
	early := duework.Entry{UserID: "amy", WorkKey: "early", Tier: long[:tenancy.MaxIDLength], DueAt: earliest,
		MissStreak: duework.MaxMissStreak, ErrorStreak: duework.MaxMissStreak}
	late := duework.Entry{UserID: "amy", WorkKey: long[:tenancy.MaxIDLength], DueAt: latest, LastRunAt: latest}
	s.schedule(early, late, entry("bo", "x", 0))
	s.wantEntry("amy", "early", early)
	s.wantEntry("amy", late.WorkKey, late)
	if es := s.dueBefore(latest, duework.MaxLimit); len(es) != 3 || es[0].WorkKey != "early" || !es[2].DueAt.Equal(latest) {
		s.errorf("DueBefore(the end of 9999, MaxLimit) = %s, want amy's early, bo's x, amy's late", showAll(es))
	}
	// Claimed until the end of 9999, amy is ready then and not before.
	c := s.claimOne(early.Key(), earliest, latest)
	if !c.Until.Equal(latest) {
		s.errorf("a claim until the end of 9999 has Until %v, want %v", c.Until, latest)
	}
	s.wantGroups(latest.Add(-time.Microsecond), "")
	s.hold("", latest.Add(-time.Second), duework.MaxLimit, time.Second, "bo")
	s.wantReady("", latest.Add(-time.Microsecond))
	s.release(latest, "bo")
	p := s.ready(duework.ReadyQuery{Now: latest, Users: duework.MaxLimit, PerUser: duework.MaxLimit})
	if len(p.Heads) != 2 || p.Heads[1].UserID != "amy" || len(p.Heads[1].Due) != 2 || !p.Heads[1].Turn.Equal(latest) {
		s.errorf("Ready at the end of 9999 with every limit at MaxLimit = %s, want bo, then amy with both entries and Turn the end of 9999", showPage(p))
	}
	// A pause until the end of 9999, and one until the start of year 1, ended at once.
	long := long[:tenancy.MaxIDLength]
	s.pause("cy", latest, long)
	s.pause("di", earliest, "operator")
	s.wantPaused(latest.Add(-time.Microsecond), "", duework.MaxLimit, duework.UserPause{UserID: "cy", Reason: long, Until: latest})
	s.wantPaused(earliest.Add(-time.Microsecond), "", duework.MaxLimit,
		duework.UserPause{UserID: "cy", Reason: long, Until: latest}, duework.UserPause{UserID: "di", Reason: "operator", Until: earliest})
	s.wantPaused(latest, "", duework.MaxLimit)
}
