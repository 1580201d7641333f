package tenancy

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The adversarial suite: tenant B holds a valid Context of its own and tries every call on
// tenant A's rows. Each attempt must fail exactly as if the row did not exist, or act only
// on B's own rows, and A's rows must come out unchanged.

type row struct {
	Secret string
	N      int
}

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func mustContext(t testing.TB, userID string) Context {
	t.Helper()
	tc, err := NewContext(userID)
	if err != nil {
		t.Fatalf("NewContext(%q) = %v", userID, err)
	}
	return tc
}

// tenantPairs are (A, B) pairs whose names would collide in a store that joined user and row
// IDs into one key, or compared them loosely.
var tenantPairs = []struct{ a, b string }{
	{"alice", "bob"},
	{"a", "a/b"},        // A's row "b/c" against B's row "c" under a "/" join
	{"a/b", "a"},        // and the other way round
	{"alice", "Alice"},  // case differs: different tenants
	{"alice", "alice "}, // trailing space: different tenants
	{"ten", "tenant"},   // prefix
}

// aRows are A's repository rows; the IDs include ones B would reach under a joined key.
func aRows() map[string]row {
	return map[string]row{
		"b/c":    {"a's b/c", 1},
		"c":      {"a's c", 2},
		"shared": {"a's shared", 3},
		"ant":    {"a's ant", 4},
	}
}

func seedRepo(t *testing.T, ctx context.Context, repo *MemoryRepository[row], a Context) {
	t.Helper()
	for id, v := range aRows() {
		if err := repo.Put(ctx, a, id, v); err != nil {
			t.Fatalf("A Put(%q) = %v", id, err)
		}
	}
}

func listRepo(t *testing.T, ctx context.Context, repo *MemoryRepository[row], tc Context) []row {
	t.Helper()
	rows, err := repo.List(ctx, tc)
	if err != nil {
		t.Fatalf("List(%s) = %v", tc.UserID(), err)
	}
	return rows
}

// sameNotFound checks that err is ErrNotFound and reads exactly like the error for an id
// that exists for nobody, apart from the id itself.
func sameNotFound(t *testing.T, call, id string, err, absentErr error, absentID string) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s on A's %q = %v, want ErrNotFound", call, id, err)
	}
	if !errors.Is(absentErr, ErrNotFound) {
		t.Fatalf("%s on absent %q = %v, want ErrNotFound", call, absentID, absentErr)
	}
	got := strings.Replace(err.Error(), strconv.Quote(id), "<id>", 1)
	want := strings.Replace(absentErr.Error(), strconv.Quote(absentID), "<id>", 1)
	if got != want {
		t.Fatalf("%s: another tenant's row reads %q, an absent row %q: the two must be indistinguishable", call, err, absentErr)
	}
}

func TestRepositoryCrossTenant(t *testing.T) {
	ctx := context.Background()
	for _, p := range tenantPairs {
		t.Run(p.a+"|"+p.b, func(t *testing.T) {
			repo := NewMemoryRepository[row]()
			a, b := mustContext(t, p.a), mustContext(t, p.b)
			seedRepo(t, ctx, repo, a)
			before := listRepo(t, ctx, repo, a)
			const absent = "nobody-has-this"

			for id := range aRows() {
				_, err := repo.Get(ctx, b, id)
				_, absentErr := repo.Get(ctx, b, absent)
				sameNotFound(t, "B Get", id, err, absentErr, absent)

				err = repo.Delete(ctx, b, id)
				absentErr = repo.Delete(ctx, b, absent)
				sameNotFound(t, "B Delete", id, err, absentErr, absent)
			}
			if got := listRepo(t, ctx, repo, b); len(got) != 0 {
				t.Fatalf("B List = %v, want nothing: B has no rows", got)
			}
			if diff := cmp.Diff(before, listRepo(t, ctx, repo, a)); diff != "" {
				t.Fatalf("B's failed calls changed A's rows (-before +after):\n%s", diff)
			}

			// Put with A's ids writes B's own rows and leaves A's alone.
			for id := range aRows() {
				if err := repo.Put(ctx, b, id, row{"b's " + id, -1}); err != nil {
					t.Fatalf("B Put(%q) = %v", id, err)
				}
			}
			if diff := cmp.Diff(before, listRepo(t, ctx, repo, a)); diff != "" {
				t.Fatalf("B's Puts changed A's rows (-before +after):\n%s", diff)
			}
			for id := range aRows() {
				got, err := repo.Get(ctx, b, id)
				if err != nil || got != (row{"b's " + id, -1}) {
					t.Fatalf("B Get(%q) = %v, %v; want B's own row", id, got, err)
				}
				// Deleting B's row leaves A's.
				if err := repo.Delete(ctx, b, id); err != nil {
					t.Fatalf("B Delete(%q) = %v", id, err)
				}
				if v, err := repo.Get(ctx, a, id); err != nil || v != aRows()[id] {
					t.Fatalf("after B deleted its own %q, A Get = %v, %v; want A's row intact", id, v, err)
				}
			}
			if diff := cmp.Diff(before, listRepo(t, ctx, repo, a)); diff != "" {
				t.Fatalf("B's Deletes of its own rows changed A's rows (-before +after):\n%s", diff)
			}
		})
	}
}

func seedWatchlist(t *testing.T, ctx context.Context, w *MemoryWatchlist, a Context) {
	t.Helper()
	for i, slug := range []string{"b/c", "c", "shared", "ant"} {
		e := WatchlistEntry{UserID: a.UserID(), Slug: slug, Tier: "hot", AddedAt: t0.Add(time.Duration(i) * time.Minute)}
		if err := w.Add(ctx, a, e); err != nil {
			t.Fatalf("A Add(%q) = %v", slug, err)
		}
	}
}

func listWatch(t *testing.T, ctx context.Context, w *MemoryWatchlist, tc Context) []WatchlistEntry {
	t.Helper()
	es, err := w.List(ctx, tc)
	if err != nil {
		t.Fatalf("List(%s) = %v", tc.UserID(), err)
	}
	return es
}

func TestWatchlistCrossTenant(t *testing.T) {
	ctx := context.Background()
	for _, p := range tenantPairs {
		t.Run(p.a+"|"+p.b, func(t *testing.T) {
			w := NewMemoryWatchlist()
			a, b := mustContext(t, p.a), mustContext(t, p.b)
			seedWatchlist(t, ctx, w, a)
			before := listWatch(t, ctx, w, a)
			const absent = "nobody-has-this"

			for _, e := range before {
				_, err := w.Get(ctx, b, e.Slug)
				_, absentErr := w.Get(ctx, b, absent)
				sameNotFound(t, "B Get", e.Slug, err, absentErr, absent)

				err = w.Remove(ctx, b, e.Slug)
				absentErr = w.Remove(ctx, b, absent)
				sameNotFound(t, "B Remove", e.Slug, err, absentErr, absent)

				// B adding A's entry as it is — UserID A — is forbidden and writes nothing.
				if err := w.Add(ctx, b, e); !errors.Is(err, ErrForbidden) {
					t.Fatalf("B Add(A's entry %q) = %v, want ErrForbidden", e.Slug, err)
				}
				changed := e
				changed.Tier = "cold"
				if err := w.Add(ctx, b, changed); !errors.Is(err, ErrForbidden) {
					t.Fatalf("B Add(A's entry %q, retiered) = %v, want ErrForbidden", e.Slug, err)
				}
			}
			if got := listWatch(t, ctx, w, b); len(got) != 0 {
				t.Fatalf("B List = %v, want nothing: every B call so far was refused", got)
			}
			if diff := cmp.Diff(before, listWatch(t, ctx, w, a)); diff != "" {
				t.Fatalf("B's refused calls changed A's watchlist (-before +after):\n%s", diff)
			}

			// B adding its own entry under A's slug writes B's row only.
			for _, e := range before {
				mine := WatchlistEntry{UserID: b.UserID(), Slug: e.Slug, Tier: "weekly", AddedAt: t0.Add(time.Hour)}
				if err := w.Add(ctx, b, mine); err != nil {
					t.Fatalf("B Add(own %q) = %v", e.Slug, err)
				}
				if got, err := w.Get(ctx, b, e.Slug); err != nil || got != mine {
					t.Fatalf("B Get(%q) = %v, %v; want B's own entry", e.Slug, got, err)
				}
				if err := w.Remove(ctx, b, e.Slug); err != nil {
					t.Fatalf("B Remove(own %q) = %v", e.Slug, err)
				}
			}
			if diff := cmp.Diff(before, listWatch(t, ctx, w, a)); diff != "" {
				t.Fatalf("B's own Adds and Removes changed A's watchlist (-before +after):\n%s", diff)
			}
		})
	}
}

func TestEntitlementsCrossTenant(t *testing.T) {
	ctx := context.Background()
	for _, p := range tenantPairs {
		ent := NewMemoryEntitlements()
		a, b := mustContext(t, p.a), mustContext(t, p.b)
		if err := ent.SetPlan(ctx, a, PlanPro); err != nil {
			t.Fatal(err)
		}
		if got, err := ent.Plan(ctx, b); err != nil || got != PlanFree {
			t.Fatalf("%q: B Plan = %v, %v; want free: A's plan must not leak", p, got, err)
		}
		if err := ent.SetPlan(ctx, b, PlanPlus); err != nil {
			t.Fatal(err)
		}
		if got, err := ent.Plan(ctx, a); err != nil || got != PlanPro {
			t.Fatalf("%q: A Plan after B's SetPlan = %v, %v; want pro", p, got, err)
		}
	}
}
