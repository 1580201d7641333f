package tenancy

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// repoModel is the reference: one plain map per tenant.
type repoModel map[string]map[string]int

func (m repoModel) list(user string) []int {
	ids := make([]string, 0, len(m[user]))
	for id := range m[user] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		out = append(out, m[user][id])
	}
	return out
}

// TestRepositoryStateMachine drives MemoryRepository and the map model with the same random
// calls from several tenants sharing row IDs, and after every step checks that every
// tenant's List agrees with the model.
func TestRepositoryStateMachine(t *testing.T) {
	users := []string{"alice", "bob", "a/b", "a"}
	ids := []string{"x", "y", "b/x", "a/b", "long-row-id"}
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		repo := NewMemoryRepository[int]()
		model := repoModel{}
		tcs := map[string]Context{}
		for _, u := range users {
			tc, err := NewContext(u)
			if err != nil {
				t.Fatal(err)
			}
			tcs[u] = tc
		}
		genUser := rapid.SampledFrom(users)
		genID := rapid.OneOf(rapid.SampledFrom(ids), rapid.SampledFrom([]string{"", "bad\nid"}))

		t.Repeat(map[string]func(*rapid.T){
			"Put": func(t *rapid.T) {
				u, id, v := genUser.Draw(t, "user"), genID.Draw(t, "id"), rapid.Int().Draw(t, "v")
				err := repo.Put(ctx, tcs[u], id, v)
				if ValidateID("id", id) != nil {
					if !errors.Is(err, ErrInvalidID) {
						t.Fatalf("Put(%s, %q) = %v, want ErrInvalidID", u, id, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Put(%s, %q) = %v", u, id, err)
				}
				if model[u] == nil {
					model[u] = map[string]int{}
				}
				model[u][id] = v
			},
			"Get": func(t *rapid.T) {
				u, id := genUser.Draw(t, "user"), genID.Draw(t, "id")
				got, err := repo.Get(ctx, tcs[u], id)
				want, ok := model[u][id]
				switch {
				case ValidateID("id", id) != nil:
					if !errors.Is(err, ErrInvalidID) {
						t.Fatalf("Get(%s, %q) = %v, want ErrInvalidID", u, id, err)
					}
				case !ok:
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Get(%s, %q) = %v, %v; want ErrNotFound", u, id, got, err)
					}
				case err != nil || got != want:
					t.Fatalf("Get(%s, %q) = %v, %v; want %v", u, id, got, err, want)
				}
			},
			"Delete": func(t *rapid.T) {
				u, id := genUser.Draw(t, "user"), genID.Draw(t, "id")
				err := repo.Delete(ctx, tcs[u], id)
				_, ok := model[u][id]
				switch {
				case ValidateID("id", id) != nil:
					if !errors.Is(err, ErrInvalidID) {
						t.Fatalf("Delete(%s, %q) = %v, want ErrInvalidID", u, id, err)
					}
				case !ok:
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Delete(%s, %q) = %v, want ErrNotFound", u, id, err)
					}
				default:
					if err != nil {
						t.Fatalf("Delete(%s, %q) = %v", u, id, err)
					}
					delete(model[u], id)
				}
			},
			"": func(t *rapid.T) {
				for _, u := range users {
					got, err := repo.List(ctx, tcs[u])
					if err != nil {
						t.Fatalf("List(%s) = %v", u, err)
					}
					if want := model.list(u); !slices.Equal(got, want) {
						t.Fatalf("List(%s) = %v, model has %v", u, got, want)
					}
				}
			},
		})
	})
}

// TestRepositoryListIsTheCallers: the slice List returns can be changed without touching
// the stored rows.
func TestRepositoryListIsTheCallers(t *testing.T) {
	ctx := context.Background()
	a := mustContext(t, "alice")
	repo := NewMemoryRepository[int]()
	for i, id := range []string{"b", "a", "c"} {
		if err := repo.Put(ctx, a, id, i); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := repo.List(ctx, a)
	if !slices.Equal(got, []int{1, 0, 2}) {
		t.Fatalf("List = %v, want values in id order [1 0 2]", got)
	}
	got[0] = 99
	if again, _ := repo.List(ctx, a); !slices.Equal(again, []int{1, 0, 2}) {
		t.Fatalf("changing List's slice changed the store: %v", again)
	}
}

// TestRepositoryConcurrent runs tenants in parallel under the race detector; each ends with
// exactly its own rows.
func TestRepositoryConcurrent(t *testing.T) {
	ctx := context.Background()
	repo := NewMemoryRepository[int]()
	w := NewMemoryWatchlist()
	users := []string{"u0", "u1", "u2", "u3"}
	var wg sync.WaitGroup
	for n, u := range users {
		tc := mustContext(t, u)
		wg.Go(func() {
			for i := range 200 {
				id := string(rune('a' + i%26))
				if err := repo.Put(ctx, tc, id, n); err != nil {
					t.Error(err)
				}
				if _, err := repo.Get(ctx, tc, id); err != nil {
					t.Error(err)
				}
				if err := w.Add(ctx, tc, WatchlistEntry{UserID: u, Slug: id, Tier: "hot"}); err != nil {
					t.Error(err)
				}
				if _, err := repo.List(ctx, tc); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for n, u := range users {
		got, _ := repo.List(ctx, mustContext(t, u))
		if len(got) != 26 {
			t.Fatalf("%s has %d rows, want 26", u, len(got))
		}
		for _, v := range got {
			if v != n {
				t.Fatalf("%s holds a value %d written by another tenant", u, v)
			}
		}
	}
}
