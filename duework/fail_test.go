package duework_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
)

// TestFailBacksOff: a failure grows ErrorStreak by one (up to MaxMissStreak), schedules
// now + NextInterval(ErrorStreak − 1) from now whatever the old DueAt, and keeps MissStreak,
// the identity and the tier; a run of failures never shortens the interval.
func TestFailBacksOff(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, e, now := genBackoff.Draw(t, "policy"), genEntry.Draw(t, "entry"), genNow.Draw(t, "now")
		got := duework.Fail(e, p, now)
		want := min(e.ErrorStreak+1, duework.MaxMissStreak)
		if got.ErrorStreak != want {
			t.Fatalf("failure from streak %d: ErrorStreak = %d, want %d", e.ErrorStreak, got.ErrorStreak, want)
		}
		if d := got.DueAt.Sub(now); d != p.NextInterval(want-1) {
			t.Fatalf("failure: interval %v, want NextInterval(%d) = %v", d, want-1, p.NextInterval(want-1))
		}
		if got.MissStreak != e.MissStreak || got.UserID != e.UserID || got.WorkKey != e.WorkKey || got.Tier != e.Tier {
			t.Fatalf("Fail changed more than the error streak and times: %+v -> %+v", e, got)
		}
		if !got.LastRunAt.Equal(now) || !got.DueAt.After(now) {
			t.Fatalf("LastRunAt %v and DueAt %v, want now %v and after it", got.LastRunAt, got.DueAt, now)
		}
		again := duework.Fail(got, p, now)
		if again.DueAt.Sub(now) < got.DueAt.Sub(now) {
			t.Fatalf("a second failure shortened the interval from %v to %v", got.DueAt.Sub(now), again.DueAt.Sub(now))
		}
		// A run that succeeds, hit or miss, ends the streak.
		if ok := duework.Advance(got, p, rapid.Bool().Draw(t, "hit"), now); ok.ErrorStreak != 0 {
			t.Fatalf("Advance after a failure left ErrorStreak %d", ok.ErrorStreak)
		}
	})
}

// TestFailAlwaysAfterNow: the new DueAt is after now for any policy, even one that breaks
// cadence.Policy's promise of a positive interval, and any stored streak, negative ones
// counting as 0.
func TestFailAlwaysAfterNow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(t, "interval"))
		e := genEntry.Draw(t, "entry")
		e.ErrorStreak = rapid.IntRange(-5, duework.MaxMissStreak).Draw(t, "errors")
		now := genNow.Draw(t, "now")
		got := duework.Fail(e, fixed(d), now)
		if !got.DueAt.After(now) {
			t.Fatalf("DueAt %v is not after now %v (interval %v)", got.DueAt, now, d)
		}
		if want := min(max(e.ErrorStreak, 0)+1, duework.MaxMissStreak); got.ErrorStreak != want {
			t.Fatalf("ErrorStreak from %d = %d, want %d", e.ErrorStreak, got.ErrorStreak, want)
		}
	})
}

// streakOf records the streak NextInterval was asked for.
type streakOf struct{ asked *int }

func (s streakOf) NextInterval(n int) time.Duration { *s.asked = n; return time.Minute }

// TestFail pins the retry schedule with a table: one, two, four … minutes up to the cap,
// counted from each failure, MissStreak kept, and the streak saturating at MaxMissStreak.
func TestFail(t *testing.T) {
	p := cadence.Backoff{Base: time.Minute, Max: 6 * time.Hour, Factor: 2}
	e := duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, MissStreak: 3}
	now := t0.Add(24 * time.Hour) // a day late: the retry counts from the failure
	for i, want := range []time.Duration{
		time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute,
		64 * time.Minute, 128 * time.Minute, 256 * time.Minute, 6 * time.Hour, 6 * time.Hour,
	} {
		e = duework.Fail(e, p, now)
		if got := e.DueAt.Sub(now); got != want || e.ErrorStreak != i+1 || e.MissStreak != 3 || !e.LastRunAt.Equal(now) {
			t.Errorf("failure %d: next in %v, ErrorStreak %d, MissStreak %d, LastRunAt %v; want %v, %d, 3, now",
				i+1, got, e.ErrorStreak, e.MissStreak, e.LastRunAt, want, i+1)
		}
		now = e.DueAt
	}
	var asked int
	for _, c := range []struct {
		name         string
		from, streak int
	}{
		{"the first failure", 0, 1},
		{"a negative stored streak", -4, 1},
		{"at the cap", duework.MaxMissStreak, duework.MaxMissStreak},
		{"just below the cap", duework.MaxMissStreak - 1, duework.MaxMissStreak},
	} {
		got := duework.Fail(duework.Entry{ErrorStreak: c.from}, streakOf{&asked}, t0)
		if got.ErrorStreak != c.streak || asked != c.streak-1 {
			t.Errorf("%s (from %d): ErrorStreak %d, NextInterval(%d); want %d and NextInterval(%d)", c.name, c.from, got.ErrorStreak, asked, c.streak, c.streak-1)
		}
	}
}
