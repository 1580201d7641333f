package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// calls is every tenant-scoped call of the in-memory implementations, made with tc on the
// row or slug id. Each returns the call's error.
func calls(repo *MemoryRepository[row], w *MemoryWatchlist, ent *MemoryEntitlements) map[string]func(ctx context.Context, tc Context, id string) error {
	return map[string]func(context.Context, Context, string) error{
		"Repository.Put": func(ctx context.Context, tc Context, id string) error {
			return repo.Put(ctx, tc, id, row{"x", 1})
		},
		"Repository.Get": func(ctx context.Context, tc Context, id string) error {
			_, err := repo.Get(ctx, tc, id)
			return err
		},
		"Repository.Delete": func(ctx context.Context, tc Context, id string) error {
			return repo.Delete(ctx, tc, id)
		},
		"Repository.List": func(ctx context.Context, tc Context, _ string) error {
			_, err := repo.List(ctx, tc)
			return err
		},
		"Watchlist.Add": func(ctx context.Context, tc Context, id string) error {
			return w.Add(ctx, tc, WatchlistEntry{UserID: tc.UserID(), Slug: id, Tier: "hot", AddedAt: t0})
		},
		"Watchlist.Remove": func(ctx context.Context, tc Context, id string) error {
			return w.Remove(ctx, tc, id)
		},
		"Watchlist.Get": func(ctx context.Context, tc Context, id string) error {
			_, err := w.Get(ctx, tc, id)
			return err
		},
		"Watchlist.List": func(ctx context.Context, tc Context, _ string) error {
			_, err := w.List(ctx, tc)
			return err
		},
		"Entitlements.Plan": func(ctx context.Context, tc Context, _ string) error {
			_, err := ent.Plan(ctx, tc)
			return err
		},
		"Entitlements.SetPlan": func(ctx context.Context, tc Context, _ string) error {
			return ent.SetPlan(ctx, tc, PlanPro)
		},
	}
}

// state is everything the stores hold, read through a valid Context per tenant.
func state(t *testing.T, repo *MemoryRepository[row], w *MemoryWatchlist, ent *MemoryEntitlements, tcs ...Context) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, tc := range tcs {
		rows, err1 := repo.List(ctx, tc)
		es, err2 := w.List(ctx, tc)
		p, err3 := ent.Plan(ctx, tc)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		out[tc.UserID()] = []any{rows, es, p}
	}
	return out
}

func newStores(t *testing.T) (*MemoryRepository[row], *MemoryWatchlist, *MemoryEntitlements, Context) {
	t.Helper()
	ctx := context.Background()
	repo, w, ent := NewMemoryRepository[row](), NewMemoryWatchlist(), NewMemoryEntitlements()
	a := mustContext(t, "alice")
	seedRepo(t, ctx, repo, a)
	seedWatchlist(t, ctx, w, a)
	if err := ent.SetPlan(ctx, a, PlanPlus); err != nil {
		t.Fatal(err)
	}
	return repo, w, ent, a
}

func TestZeroContextRefusedEverywhere(t *testing.T) {
	repo, w, ent, a := newStores(t)
	before := state(t, repo, w, ent, a)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range calls(repo, w, ent) {
		// Whatever else is wrong — an existing id, a bad id, a done ctx — the zero Context
		// is the error reported.
		for _, id := range []string{"c", "", "bad\x00id", strings.Repeat("x", MaxIDLength+1)} {
			for _, ctx := range []context.Context{context.Background(), cancelled} {
				if err := call(ctx, Context{}, id); !errors.Is(err, ErrNoTenant) {
					t.Errorf("%s(zero Context, %q) = %v, want ErrNoTenant", name, id, err)
				}
			}
		}
	}
	if diff := cmp.Diff(before, state(t, repo, w, ent, a)); diff != "" {
		t.Fatalf("calls with the zero Context changed state (-before +after):\n%s", diff)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	repo, w, ent, a := newStores(t)
	before := state(t, repo, w, ent, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range calls(repo, w, ent) {
		if err := call(ctx, a, "c"); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx = %v, want context.Canceled", name, err)
		}
	}
	if diff := cmp.Diff(before, state(t, repo, w, ent, a)); diff != "" {
		t.Fatalf("calls with a cancelled ctx changed state (-before +after):\n%s", diff)
	}
}

// badIDs are refused everywhere an ID is taken, each for the reason named.
var badIDs = map[string]string{
	"empty":                  "",
	"NUL":                    "a\x00b",
	"newline":                "a\nb",
	"tab":                    "\tab",
	"DEL":                    "ab\x7f",
	"C1 control (NEL)":       "a\u0085b",
	"escape":                 "\x1b[31mred",
	"invalid UTF-8":          "a\xffb",
	"over MaxIDLength":       strings.Repeat("x", MaxIDLength+1),
	"over MaxIDLength, UTF8": strings.Repeat("é", MaxIDLength/2) + "x",
}

func TestInvalidIDsRefused(t *testing.T) {
	for reason, id := range badIDs {
		if tc, err := NewContext(id); !errors.Is(err, ErrInvalidID) || tc != (Context{}) {
			t.Errorf("NewContext(%s) = %v, %v; want the zero Context and ErrInvalidID", reason, tc, err)
		}
	}
	repo, w, ent, a := newStores(t)
	before := state(t, repo, w, ent, a)
	for name, call := range calls(repo, w, ent) {
		if strings.HasSuffix(name, ".List") || strings.HasPrefix(name, "Entitlements.") {
			continue // these take no id
		}
		for reason, id := range badIDs {
			err := call(context.Background(), a, id)
			if !errors.Is(err, ErrInvalidID) {
				t.Errorf("%s(%s) = %v, want ErrInvalidID", name, reason, err)
				continue
			}
			field := "id"
			if strings.HasPrefix(name, "Watchlist.") {
				field = "slug"
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("%s(%s) = %q, want the error to name the field %q", name, reason, err, field)
			}
		}
	}
	if diff := cmp.Diff(before, state(t, repo, w, ent, a)); diff != "" {
		t.Fatalf("refused ids changed state (-before +after):\n%s", diff)
	}
}

func TestLongestIDAccepted(t *testing.T) {
	id := strings.Repeat("é", MaxIDLength/2) // exactly MaxIDLength bytes
	tc, err := NewContext(id)
	if err != nil || tc.UserID() != id {
		t.Fatalf("NewContext(%d bytes) = %v, %v; want accepted", len(id), tc, err)
	}
	repo := NewMemoryRepository[int]()
	if err := repo.Put(context.Background(), tc, id, 7); err != nil {
		t.Fatalf("Put(%d-byte id) = %v", len(id), err)
	}
}

func TestAddRefusesBadEntries(t *testing.T) {
	ctx := context.Background()
	repo, w, ent, a := newStores(t)
	b := mustContext(t, "bob")
	before := state(t, repo, w, ent, a, b)
	tests := []struct {
		name string
		e    WatchlistEntry
		want error
	}{
		{"another user's ID", WatchlistEntry{UserID: "alice", Slug: "new", Tier: "hot"}, ErrForbidden},
		{"an empty UserID", WatchlistEntry{UserID: "", Slug: "new", Tier: "hot"}, ErrForbidden},
		{"a UserID differing in case", WatchlistEntry{UserID: "Bob", Slug: "new", Tier: "hot"}, ErrForbidden},
		{"an empty tier", WatchlistEntry{UserID: "bob", Slug: "new", Tier: ""}, ErrInvalidID},
		{"a tier with a control character", WatchlistEntry{UserID: "bob", Slug: "new", Tier: "hot\n"}, ErrInvalidID},
		{"an empty slug", WatchlistEntry{UserID: "bob", Slug: "", Tier: "hot"}, ErrInvalidID},
	}
	for _, tt := range tests {
		err := w.Add(ctx, b, tt.e)
		if !errors.Is(err, tt.want) {
			t.Errorf("Add(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
	if diff := cmp.Diff(before, state(t, repo, w, ent, a, b)); diff != "" {
		t.Fatalf("refused Adds wrote something (-before +after):\n%s", diff)
	}
	// A refused entry is never rewritten to the caller's user either.
	if _, err := w.Get(ctx, b, "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after refused Adds, B Get(new) = %v, want ErrNotFound", err)
	}
}

func TestEntitlements(t *testing.T) {
	ctx := context.Background()
	ent := NewMemoryEntitlements()
	a := mustContext(t, "alice")
	if p, err := ent.Plan(ctx, a); err != nil || p != PlanFree {
		t.Fatalf("Plan of a tenant never given one = %v, %v; want free", p, err)
	}
	for _, p := range []PlanID{PlanPlus, PlanPro, PlanFree} {
		if err := ent.SetPlan(ctx, a, p); err != nil {
			t.Fatalf("SetPlan(%v) = %v", p, err)
		}
		if got, err := ent.Plan(ctx, a); err != nil || got != p {
			t.Fatalf("Plan after SetPlan(%v) = %v, %v", p, got, err)
		}
	}
	if err := ent.SetPlan(ctx, a, PlanPro); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []PlanID{"", "enterprise", "Pro", "pro "} {
		if err := ent.SetPlan(ctx, a, bad); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("SetPlan(%q) = %v, want ErrInvalidPlan", bad, err)
		}
		if bad.Valid() {
			t.Errorf("PlanID(%q).Valid() = true", bad)
		}
	}
	if p, _ := ent.Plan(ctx, a); p != PlanPro {
		t.Fatalf("refused SetPlan calls changed the plan to %v, want pro", p)
	}
	for _, p := range []PlanID{PlanFree, PlanPlus, PlanPro} {
		if !p.Valid() {
			t.Errorf("%v.Valid() = false", p)
		}
	}
}

func TestZeroValuesUsable(t *testing.T) {
	ctx := context.Background()
	a := mustContext(t, "alice")
	var repo MemoryRepository[int]
	if _, err := repo.Get(ctx, a, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("zero repository Get = %v, want ErrNotFound", err)
	}
	if err := repo.Put(ctx, a, "x", 1); err != nil {
		t.Fatalf("zero repository Put = %v", err)
	}
	var w MemoryWatchlist
	if err := w.Add(ctx, a, WatchlistEntry{UserID: "alice", Slug: "s", Tier: "hot"}); err != nil {
		t.Fatalf("zero watchlist Add = %v", err)
	}
	var ent MemoryEntitlements
	if err := ent.SetPlan(ctx, a, PlanPro); err != nil {
		t.Fatalf("zero entitlements SetPlan = %v", err)
	}
	if p, err := ent.Plan(ctx, a); err != nil || p != PlanPro {
		t.Fatalf("zero entitlements Plan = %v, %v", p, err)
	}
}

func TestWatchlistAddReplacesRemoveDeletes(t *testing.T) {
	ctx := context.Background()
	a := mustContext(t, "alice")
	w := NewMemoryWatchlist()
	first := WatchlistEntry{UserID: "alice", Slug: "jobs", Tier: "hot", AddedAt: t0}
	second := WatchlistEntry{UserID: "alice", Slug: "jobs", Tier: "cold", AddedAt: t0.Add(time.Hour)}
	for _, e := range []WatchlistEntry{first, second} {
		if err := w.Add(ctx, a, e); err != nil {
			t.Fatalf("Add(%+v) = %v", e, err)
		}
	}
	if got, err := w.Get(ctx, a, "jobs"); err != nil || got != second {
		t.Fatalf("Get after a second Add = %+v, %v; want the replacement %+v", got, err, second)
	}
	if es, _ := w.List(ctx, a); len(es) != 1 {
		t.Fatalf("List = %v, want one entry: Add replaces by slug", es)
	}
	if err := w.Remove(ctx, a, "jobs"); err != nil {
		t.Fatalf("Remove = %v", err)
	}
	if _, err := w.Get(ctx, a, "jobs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Remove = %v, want ErrNotFound", err)
	}
	if err := w.Remove(ctx, a, "jobs"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Remove = %v, want ErrNotFound", err)
	}
}
