package duework_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// genBackoff draws a valid cadence.Backoff, the presets among them.
var genBackoff = rapid.OneOf(
	rapid.SampledFrom([]cadence.Backoff{cadence.TierHot, cadence.TierWarm, cadence.TierCold, cadence.DigestWeekly}),
	rapid.Custom(func(t *rapid.T) cadence.Backoff {
		base := time.Duration(rapid.Int64Range(1, int64(24*time.Hour)).Draw(t, "base"))
		return cadence.Backoff{
			Base:   base,
			Max:    base + time.Duration(rapid.Int64Range(0, int64(30*24*time.Hour)).Draw(t, "spread")),
			Factor: rapid.Float64Range(1, 10).Draw(t, "factor"),
		}
	}),
)

var genEntry = rapid.Custom(func(t *rapid.T) duework.Entry {
	return duework.Entry{
		UserID: "u", WorkKey: "k", Tier: "warm",
		DueAt:       t0.Add(time.Duration(rapid.Int64Range(-int64(1000*time.Hour), int64(1000*time.Hour)).Draw(t, "due"))),
		LastRunAt:   t0.Add(-time.Duration(rapid.Int64Range(0, int64(1000*time.Hour)).Draw(t, "last"))),
		MissStreak:  rapid.OneOf(rapid.IntRange(0, 70), rapid.IntRange(0, duework.MaxMissStreak)).Draw(t, "streak"),
		ErrorStreak: rapid.OneOf(rapid.IntRange(0, 70), rapid.IntRange(0, duework.MaxMissStreak)).Draw(t, "errors"),
	}
})

var genNow = rapid.Custom(func(t *rapid.T) time.Time {
	return t0.Add(time.Duration(rapid.Int64Range(-int64(5000*time.Hour), int64(5000*time.Hour)).Draw(t, "now")))
})

// TestAdvanceHitResets: a hit resets the streak and lands at now + NextInterval(0), counted
// from now whatever the old DueAt was.
func TestAdvanceHitResets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, e, now := genBackoff.Draw(t, "policy"), genEntry.Draw(t, "entry"), genNow.Draw(t, "now")
		got := duework.Advance(e, p, true, now)
		if got.MissStreak != 0 {
			t.Fatalf("hit: MissStreak = %d, want 0", got.MissStreak)
		}
		if want := now.Add(p.NextInterval(0)); !got.DueAt.Equal(want) {
			t.Fatalf("hit: DueAt = %v, want now + NextInterval(0) = %v", got.DueAt, want)
		}
		checkAdvanced(t, e, got, now)
	})
}

// TestAdvanceMissBacksOff: a miss increments the streak (up to MaxMissStreak) and never
// shortens the interval.
func TestAdvanceMissBacksOff(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, e, now := genBackoff.Draw(t, "policy"), genEntry.Draw(t, "entry"), genNow.Draw(t, "now")
		got := duework.Advance(e, p, false, now)
		want := min(e.MissStreak+1, duework.MaxMissStreak)
		if got.MissStreak != want {
			t.Fatalf("miss from streak %d: MissStreak = %d, want %d", e.MissStreak, got.MissStreak, want)
		}
		if d := got.DueAt.Sub(now); d != p.NextInterval(got.MissStreak) {
			t.Fatalf("miss: interval %v, want NextInterval(%d) = %v", d, got.MissStreak, p.NextInterval(got.MissStreak))
		}
		if d, before := got.DueAt.Sub(now), p.NextInterval(e.MissStreak); d < before {
			t.Fatalf("miss at streak %d shortened the interval from %v to %v", e.MissStreak, before, d)
		}
		// And a run of misses never shortens it either.
		again := duework.Advance(got, p, false, now)
		if again.DueAt.Sub(now) < got.DueAt.Sub(now) {
			t.Fatalf("a second miss shortened the interval from %v to %v", got.DueAt.Sub(now), again.DueAt.Sub(now))
		}
		checkAdvanced(t, e, got, now)
	})
}

// TestAdvanceAlwaysAfterNow: the new DueAt is after now for any policy, even one that
// breaks cadence.Policy's promise of a positive interval, and any streak.
func TestAdvanceAlwaysAfterNow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(t, "interval"))
		e := genEntry.Draw(t, "entry")
		e.MissStreak = rapid.IntRange(-5, duework.MaxMissStreak).Draw(t, "streak")
		now := genNow.Draw(t, "now")
		got := duework.Advance(e, fixed(d), rapid.Bool().Draw(t, "hit"), now)
		if !got.DueAt.After(now) {
			t.Fatalf("DueAt %v is not after now %v (interval %v)", got.DueAt, now, d)
		}
		if got.MissStreak < 0 {
			t.Fatalf("MissStreak went negative: %d", got.MissStreak)
		}
	})
}

// checkAdvanced checks what every Advance does: identity and tier unchanged, ErrorStreak
// 0, LastRunAt now, DueAt after now.
func checkAdvanced(t *rapid.T, before, after duework.Entry, now time.Time) {
	t.Helper()
	if after.ErrorStreak != 0 {
		t.Fatalf("Advance from ErrorStreak %d left it at %d, want 0", before.ErrorStreak, after.ErrorStreak)
	}
	if after.UserID != before.UserID || after.WorkKey != before.WorkKey || after.Tier != before.Tier {
		t.Fatalf("Advance changed the identity or tier: %+v -> %+v", before, after)
	}
	if !after.LastRunAt.Equal(now) {
		t.Fatalf("LastRunAt = %v, want now %v", after.LastRunAt, now)
	}
	if !after.DueAt.After(now) {
		t.Fatalf("DueAt %v is not after now %v", after.DueAt, now)
	}
}

// fixed is a Policy with one interval, which may be (wrongly) non-positive.
type fixed time.Duration

func (f fixed) NextInterval(int) time.Duration { return time.Duration(f) }

// TestAdvanceCountsFromNow pins the outage rule with a table: however late the run, the
// next DueAt is counted from now, so a source runs once after an outage.
func TestAdvanceCountsFromNow(t *testing.T) {
	p := cadence.Backoff{Base: time.Minute, Max: time.Hour, Factor: 2}
	e := duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, MissStreak: 2}
	for _, tc := range []struct {
		name   string
		now    time.Time
		hit    bool
		due    time.Time
		streak int
	}{
		{"on time, hit", t0, true, t0.Add(time.Minute), 0},
		{"on time, miss", t0, false, t0.Add(8 * time.Minute), 3},
		{"a day late, hit", t0.Add(24 * time.Hour), true, t0.Add(24*time.Hour + time.Minute), 0},
		{"a day late, miss", t0.Add(24 * time.Hour), false, t0.Add(24*time.Hour + 8*time.Minute), 3},
		{"early, hit", t0.Add(-time.Hour), true, t0.Add(-time.Hour + time.Minute), 0},
	} {
		got := duework.Advance(e, p, tc.hit, tc.now)
		if !got.DueAt.Equal(tc.due) || got.MissStreak != tc.streak {
			t.Errorf("%s: DueAt %v streak %d, want %v streak %d", tc.name, got.DueAt, got.MissStreak, tc.due, tc.streak)
		}
	}
	capped := duework.Advance(duework.Entry{MissStreak: duework.MaxMissStreak}, p, false, t0)
	if capped.MissStreak != duework.MaxMissStreak || !capped.DueAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("a miss at MaxMissStreak: streak %d due %v, want the cap and Max", capped.MissStreak, capped.DueAt)
	}
}

// TestValidate: every way an Entry can be refused, each naming the field.
func TestValidate(t *testing.T) {
	tc, err := tenancy.NewContext("u")
	if err != nil {
		t.Fatal(err)
	}
	ok := duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0}
	if err := ok.Validate(tc); err != nil {
		t.Fatalf("valid entry: %v", err)
	}
	for _, c := range []struct {
		name  string
		e     duework.Entry
		tc    tenancy.Context
		want  error
		field string
	}{
		{"zero context", ok, tenancy.Context{}, tenancy.ErrNoTenant, ""},
		{"other user", duework.Entry{UserID: "v", WorkKey: "k", DueAt: t0}, tc, duework.ErrInvalid, "UserID"},
		{"empty work key", duework.Entry{UserID: "u", DueAt: t0}, tc, duework.ErrInvalid, "WorkKey"},
		{"control character", duework.Entry{UserID: "u", WorkKey: "a\nb", DueAt: t0}, tc, duework.ErrInvalid, "WorkKey"},
		{"long work key", duework.Entry{UserID: "u", WorkKey: strings.Repeat("k", tenancy.MaxIDLength+1), DueAt: t0}, tc, duework.ErrInvalid, "WorkKey"},
		{"zero DueAt", duework.Entry{UserID: "u", WorkKey: "k"}, tc, duework.ErrInvalid, "DueAt"},
		{"negative streak", duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, MissStreak: -1}, tc, duework.ErrInvalid, "MissStreak"},
		{"streak past the cap", duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, MissStreak: duework.MaxMissStreak + 1}, tc, duework.ErrInvalid, "MissStreak"},
		{"tier with a control character", duework.Entry{UserID: "u", WorkKey: "k", Tier: "hot\x1b[0m", DueAt: t0}, tc, duework.ErrInvalid, "Tier"},
		{"tier not UTF-8", duework.Entry{UserID: "u", WorkKey: "k", Tier: "\xff", DueAt: t0}, tc, duework.ErrInvalid, "Tier"},
		{"long tier", duework.Entry{UserID: "u", WorkKey: "k", Tier: strings.Repeat("t", tenancy.MaxIDLength+1), DueAt: t0}, tc, duework.ErrInvalid, "Tier"},
		{"DueAt past MaxTime", duework.Entry{UserID: "u", WorkKey: "k", DueAt: vocab.MaxTime.Add(1)}, tc, duework.ErrInvalid, "DueAt"},
		{"DueAt before MinTime", duework.Entry{UserID: "u", WorkKey: "k", DueAt: vocab.MinTime.Add(-1)}, tc, duework.ErrInvalid, "DueAt"},
		{"LastRunAt past MaxTime", duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, LastRunAt: vocab.MaxTime.Add(1)}, tc, duework.ErrInvalid, "LastRunAt"},
		{"negative error streak", duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, ErrorStreak: -1}, tc, duework.ErrInvalid, "ErrorStreak"},
		{"error streak past the cap", duework.Entry{UserID: "u", WorkKey: "k", DueAt: t0, ErrorStreak: duework.MaxMissStreak + 1}, tc, duework.ErrInvalid, "ErrorStreak"},
	} {
		err := c.e.Validate(c.tc)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want %v naming %q", c.name, err, c.want, c.field)
		}
	}
}

// FuzzValidate: Validate never panics, refuses exactly what the name and time rules,
// the Context and the other field rules refuse, and always with ErrInvalid or ErrNoTenant.
func FuzzValidate(f *testing.F) {
	f.Add("u", "u", "k", int64(1), 0, 0)
	f.Add("u", "v", "", int64(0), -1, 0)
	f.Add("", "u", "a\x00b", int64(1), 3, 1)
	f.Add("ü", "ü", "\xff", int64(-5), 1, -1)
	f.Add("u", "u", "k", int64(1)<<40, duework.MaxMissStreak+1, duework.MaxMissStreak)
	f.Add("u", "u", "k", int64(1), 2, duework.MaxMissStreak+1)
	f.Fuzz(func(t *testing.T, ctxUser, user, work string, dueSec int64, streak, errStreak int) {
		tc, _ := tenancy.NewContext(ctxUser) // the zero Context when ctxUser is bad
		e := duework.Entry{UserID: user, WorkKey: work, MissStreak: streak, ErrorStreak: errStreak}
		if dueSec != 0 {
			e.DueAt = time.Unix(dueSec, 0)
		}
		err := e.Validate(tc)
		valid := tc.Check() == nil && user == tc.UserID() && tenancy.ValidateID("WorkKey", work) == nil && !e.DueAt.IsZero() &&
			vocab.ValidTime(e.DueAt) && streak >= 0 && streak <= duework.MaxMissStreak && errStreak >= 0 && errStreak <= duework.MaxMissStreak
		if (err == nil) != valid {
			t.Fatalf("Validate(%+v) under %q = %v, want valid %v", e, tc.UserID(), err, valid)
		}
		if err != nil && !errors.Is(err, duework.ErrInvalid) && !errors.Is(err, tenancy.ErrNoTenant) {
			t.Fatalf("Validate error %v wraps neither ErrInvalid nor ErrNoTenant", err)
		}
	})
}
