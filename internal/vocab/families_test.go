package vocab_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

var (
	bg = context.Background()
	t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// verdict is one family's answer for one input: nil, or an error that must wrap the
// family's sentinel and name the field.
type verdict struct {
	family, field string
	sentinel      error
	err           error
}

// nameVerdicts asks every package that stores names what it makes of s, through the
// calls a host makes: tenancy's IDs, tiers and plans, cadence's tier names, duework's work
// keys, tiers, groups and user IDs, maintenance's task, holder and blocker names.
func nameVerdicts(s string) []verdict {
	amy, err := tenancy.NewContext("amy")
	if err != nil {
		panic(err)
	}
	_, errCtx := tenancy.NewContext(s)
	errStore := tenancy.NewMemoryRepository[int]().Put(bg, amy, s, 1)
	errSlug := tenancy.WatchlistEntry{UserID: "amy", Slug: s, Tier: "hot"}.Validate(amy)
	errTier := tenancy.WatchlistEntry{UserID: "amy", Slug: "a", Tier: s}.Validate(amy)
	errPlan := tenancy.PlanID(s).Check()
	errRegister := new(cadence.Registry).Register(s, cadence.TierHot)

	errKey := duework.Entry{UserID: "amy", WorkKey: s, DueAt: t0}.Validate(amy)
	errDueTier := duework.Entry{UserID: "amy", WorkKey: "a", Tier: s, DueAt: t0}.Validate(amy)
	errGroup := duework.ReadyQuery{Group: s, Now: t0, Users: 1, PerUser: 1}.Validate()
	_, errUser := duework.NewMemory().User(bg, s, t0)
	if errors.Is(errUser, duework.ErrNotFound) {
		errUser = nil // a valid ID of a user the index does not store
	}

	_, errHolder := maintenance.NewMemoryLease(time.Hour).Acquire(bg, s, time.Minute, t0)
	errTask := maintenance.TaskState{Name: s}.Validate()
	errBlocker := maintenance.TaskState{Name: "a", DeferBlocker: s}.Validate()
	_, errSched := maintenance.NewScheduler([]maintenance.Task{{Name: s, Cadence: time.Hour, Run: noop}}, maintenance.Config{})
	return []verdict{
		{"tenancy.NewContext", "user ID", tenancy.ErrInvalidID, errCtx},
		{"tenancy.Repository.Put", "id", tenancy.ErrInvalidID, errStore},
		{"tenancy.WatchlistEntry slug", "slug", tenancy.ErrInvalidID, errSlug},
		{"tenancy.WatchlistEntry tier", "tier", tenancy.ErrInvalidID, errTier},
		{"tenancy.PlanID", "plan", tenancy.ErrInvalidPlan, errPlan},
		{"cadence.Registry.Register", "tier name", cadence.ErrInvalidTierName, errRegister},
		{"duework.Entry WorkKey", "WorkKey", duework.ErrInvalid, errKey},
		{"duework.Entry Tier", "Tier", duework.ErrInvalid, errDueTier},
		{"duework.ReadyQuery Group", "Group", duework.ErrInvalid, errGroup},
		{"duework.Memory.User", "UserID", duework.ErrInvalid, errUser},
		{"maintenance.Lease holder", "holder", maintenance.ErrInvalid, errHolder},
		{"maintenance.TaskState Name", "Name", maintenance.ErrInvalid, errTask},
		{"maintenance.TaskState DeferBlocker", "DeferBlocker", maintenance.ErrInvalid, errBlocker},
		{"maintenance.NewScheduler task", "Name", maintenance.ErrInvalid, errSched},
	}
}

func noop(context.Context) error { return nil }

// optional reports whether a family takes the empty string as "none" rather than as a
// name: duework's Tier and Group, maintenance's DeferBlocker.
func optional(family string) bool {
	return family == "duework.Entry Tier" || family == "duework.ReadyQuery Group" ||
		family == "maintenance.TaskState DeferBlocker"
}

// agree fails unless every family accepts s exactly when the shared rule does, and
// refuses it with its own sentinel, naming its field.
func agree(t *testing.T, s string) {
	t.Helper()
	want := vocab.ValidName(s)
	for _, v := range nameVerdicts(s) {
		ok := want || (s == "" && optional(v.family))
		switch {
		case ok && v.err != nil:
			t.Errorf("%s refuses %q, which the rule accepts: %v", v.family, s, v.err)
		case !ok && v.err == nil:
			t.Errorf("%s accepts %q, which the rule refuses", v.family, s)
		case !ok && (!errors.Is(v.err, v.sentinel) || !strings.Contains(v.err.Error(), v.field)):
			t.Errorf("%s refuses %q with %v, want %v naming %s", v.family, s, v.err, v.sentinel, v.field)
		}
	}
}

// Every family accepts and refuses the same names: tenancy's IDs, cadence's tier names,
// duework's work keys, tiers and groups, maintenance's task and holder names.
func TestFamiliesAgreeOnNames(t *testing.T) {
	for _, c := range names {
		agree(t, c.s)
	}
}

// Every family accepts and refuses the same times: years 1 to 9999 UTC, both ends in.
func TestFamiliesAgreeOnTimes(t *testing.T) {
	amy, err := tenancy.NewContext("amy")
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{
		vocab.MinTime.Add(time.Nanosecond),
		vocab.MinTime.Add(-time.Nanosecond),
		t0,
		vocab.MaxTime,
		vocab.MaxTime.Add(time.Nanosecond),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 30, 0, 0, time.FixedZone("+01", 3600)),
		time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, at := range times {
		want := vocab.ValidTime(at)
		_, _, errLease := maintenance.NewMemoryLease(time.Hour).Current(bg, at)
		_, errReady := duework.NewMemory().Ready(bg, duework.ReadyQuery{Now: at, Users: 1, PerUser: 1})
		for _, v := range []verdict{
			{"tenancy.WatchlistEntry AddedAt", "AddedAt", tenancy.ErrInvalidID,
				tenancy.WatchlistEntry{UserID: "amy", Slug: "a", Tier: "hot", AddedAt: at}.Validate(amy)},
			{"duework.Entry DueAt", "DueAt", duework.ErrInvalid, duework.Entry{UserID: "amy", WorkKey: "a", DueAt: at}.Validate(amy)},
			{"duework.Entry LastRunAt", "LastRunAt", duework.ErrInvalid,
				duework.Entry{UserID: "amy", WorkKey: "a", DueAt: t0, LastRunAt: at}.Validate(amy)},
			{"duework.Index.Ready", "Now", duework.ErrInvalid, errReady},
			{"maintenance.TaskState LastRunAt", "LastRunAt", maintenance.ErrInvalid, maintenance.TaskState{Name: "a", LastRunAt: at}.Validate()},
			{"maintenance.Lease.Current", "now", maintenance.ErrInvalid, errLease},
		} {
			switch {
			case want && v.err != nil:
				t.Errorf("%s refuses %v, which the rule accepts: %v", v.family, at, v.err)
			case !want && v.err == nil:
				t.Errorf("%s accepts %v, which the rule refuses", v.family, at)
			case !want && (!errors.Is(v.err, v.sentinel) || !strings.Contains(v.err.Error(), v.field)):
				t.Errorf("%s refuses %v with %v, want %v naming %s", v.family, at, v.err, v.sentinel, v.field)
			}
		}
	}
}

// The families' exported bounds are the shared ones.
func TestFamiliesShareTheBounds(t *testing.T) {
	if tenancy.MaxIDLength != vocab.MaxNameLength || duework.MaxLimit != vocab.MaxLimit || duework.MaxWeight != vocab.MaxWeight {
		t.Errorf("tenancy.MaxIDLength %d, duework.MaxLimit %d, duework.MaxWeight %d; want the shared %d, %d, %d",
			tenancy.MaxIDLength, duework.MaxLimit, duework.MaxWeight, vocab.MaxNameLength, vocab.MaxLimit, vocab.MaxWeight)
	}
}

// FuzzFamiliesAgree runs the names check on any input.
func FuzzFamiliesAgree(f *testing.F) {
	for _, c := range names {
		f.Add(c.s)
	}
	f.Fuzz(agree)
}
