package duework

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/tenancy"
)

// item is a test node for the treap against a sorted-slice model.
type item struct {
	key  int
	kid  [2]*item
	prio uint32
}

var itemTree = treap[item]{
	cmp:  func(a, b *item) int { return cmp.Compare(a.key, b.key) },
	kids: func(n *item) *[2]*item { return &n.kid },
	prio: func(n *item) uint32 { return n.prio },
}

// checkTreap verifies the search-tree order and the heap order of priorities, and returns
// the keys in order.
func checkTreap(t rapid.TB, root *item) []int {
	t.Helper()
	var keys []int
	var walk func(n *item, lo, hi *int)
	walk = func(n *item, lo, hi *int) {
		if n == nil {
			return
		}
		if (lo != nil && n.key <= *lo) || (hi != nil && n.key >= *hi) {
			t.Fatalf("treap: key %d out of its subtree's range", n.key)
		}
		for _, k := range n.kid {
			if k != nil && k.prio > n.prio {
				t.Fatalf("treap: child %d has a higher priority than its parent %d", k.key, n.key)
			}
		}
		walk(n.kid[0], lo, &n.key)
		keys = append(keys, n.key)
		walk(n.kid[1], &n.key, hi)
	}
	walk(root, nil, nil)
	return keys
}

// TestTreapAgainstSortedSlice drives the treap with random inserts and removals and checks
// every query against a sorted slice.
func TestTreapAgainstSortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var root *item
		nodes := map[int]*item{}
		var model []int
		key := rapid.IntRange(0, 60)
		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				k := key.Draw(t, "key")
				if nodes[k] != nil {
					t.Skip("present")
				}
				n := &item{key: k, prio: rapid.Uint32Range(0, 8).Draw(t, "prio")} // many ties
				nodes[k] = n
				root = itemTree.insert(root, n)
				i, _ := slices.BinarySearch(model, k)
				model = slices.Insert(model, i, k)
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				k := rapid.SampledFrom(model).Draw(t, "key")
				root = itemTree.remove(root, nodes[k])
				delete(nodes, k)
				i, _ := slices.BinarySearch(model, k)
				model = slices.Delete(model, i, i+1)
			},
			"after": func(t *rapid.T) {
				k := key.Draw(t, "key")
				got := itemTree.after(root, &item{key: k})
				i, found := slices.BinarySearch(model, k)
				if found {
					i++
				}
				if i == len(model) {
					if got != nil {
						t.Fatalf("after(%d) = %d, want none", k, got.key)
					}
				} else if got == nil || got.key != model[i] {
					t.Fatalf("after(%d) = %v, want %d", k, got, model[i])
				}
			},
			"find": func(t *rapid.T) {
				k := key.Draw(t, "key")
				got := itemTree.find(root, func(n *item) int { return cmp.Compare(k, n.key) })
				if got != nodes[k] {
					t.Fatalf("find(%d) = %v, want %v", k, got, nodes[k])
				}
			},
			"ascend": func(t *rapid.T) {
				stop := rapid.IntRange(0, len(model)).Draw(t, "stop")
				var seen []int
				all := itemTree.ascend(root, func(n *item) bool {
					if len(seen) == stop {
						return false
					}
					seen = append(seen, n.key)
					return true
				})
				if !slices.Equal(seen, model[:stop]) || all != (stop == len(model)) {
					t.Fatalf("ascend stopping at %d: %v (all %v), want %v", stop, seen, all, model[:stop])
				}
			},
			"": func(t *rapid.T) {
				if got := checkTreap(t, root); !slices.Equal(got, model) && !(len(got) == 0 && len(model) == 0) {
					t.Fatalf("in-order keys %v, want %v", got, model)
				}
				m := itemTree.min(root)
				if (m == nil) != (len(model) == 0) || (m != nil && m.key != model[0]) {
					t.Fatalf("min = %v, want first of %v", m, model)
				}
			},
		})
	})
}

// check verifies every internal invariant of m: each node is in exactly the tree its state
// says, every tree is ordered, each user's first is its free tree's min, byDue lists exactly
// the users with free entries, and the user counts are right.
func (m *Memory) check(t rapid.TB) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	inFree := map[*node]bool{}
	inClaims := map[*node]bool{}
	var prev *node
	freeCheck := func(tr *treap[node], root *node, into map[*node]bool, what string) {
		prev = nil
		tr.ascend(root, func(n *node) bool {
			if prev != nil && tr.cmp(prev, n) >= 0 {
				t.Fatalf("%s tree out of order at %q", what, n.workKey)
			}
			for _, k := range *tr.kids(n) {
				if k != nil && tr.prio(k) > tr.prio(n) {
					t.Fatalf("%s tree: heap order broken at %q", what, n.workKey)
				}
			}
			if into[n] {
				t.Fatalf("%s tree holds %q twice", what, n.workKey)
			}
			into[n] = true
			prev = n
			return true
		})
	}
	freeCheck(&claimTree, m.claims, inClaims, "claims")
	for n := range inClaims {
		if !n.held() || n.token == 0 {
			t.Fatalf("claims tree holds %q, which is not held", n.workKey)
		}
	}
	listed := map[*user]bool{}
	var prevU *user
	userTree.ascend(m.byDue, func(u *user) bool {
		if prevU != nil && userTree.cmp(prevU, u) >= 0 {
			t.Fatalf("byDue out of order at %q", u.id)
		}
		listed[u] = true
		prevU = u
		return true
	})
	if len(listed) > len(m.users) {
		t.Fatalf("byDue lists %d users, the index has %d", len(listed), len(m.users))
	}
	for id, u := range m.users {
		if u.id != id {
			t.Fatalf("user %q filed under %q", u.id, id)
		}
		keys := map[*node]bool{}
		freeCheck(&keyTree, u.keys, keys, "keys of "+id)
		if len(keys) == 0 && u.lastServed().IsZero() {
			t.Fatalf("user %q has no entries and was never served but is kept", id)
		}
		free := map[*node]bool{}
		freeCheck(&freeTree, u.free, free, "free of "+id)
		if u.first != freeTree.min(u.free) {
			t.Fatalf("user %q: first is not the free tree's min", id)
		}
		if listed[u] != (u.first != nil) {
			t.Fatalf("user %q: listed in byDue %v with first %v", id, listed[u], u.first)
		}
		for n := range keys {
			if n.user != u {
				t.Fatalf("entry %q of %q points to user %q", n.workKey, id, n.user.id)
			}
			if free[n] == inClaims[n] {
				t.Fatalf("entry %q of %q: in free tree %v, in claims tree %v", n.workKey, id, free[n], inClaims[n])
			}
			inFree[n] = true
		}
		for n := range free {
			if !keys[n] || n.held() {
				t.Fatalf("free tree of %q holds a stray or held entry %q", id, n.workKey)
			}
		}
	}
	for n := range inClaims {
		if !inFree[n] {
			t.Fatalf("claims tree holds %q, which no user has", n.workKey)
		}
	}
}

// TestMemoryInvariants runs random operations, with now moving both ways, and checks every
// internal invariant after each.
func TestMemoryInvariants(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		m := NewMemory()
		users := rapid.SampledFrom([]string{"a", "b", "c"})
		keys := rapid.SampledFrom([]string{"k1", "k2", "k3", "k4", "k5"})
		at := func(t *rapid.T, label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(-5, 20).Draw(t, label)) * time.Second)
		}
		var claims []Claim
		tc := func(u string) tenancy.Context {
			c, err := tenancy.NewContext(u)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		t.Repeat(map[string]func(*rapid.T){
			"schedule": func(t *rapid.T) {
				u := users.Draw(t, "user")
				e := Entry{UserID: u, WorkKey: keys.Draw(t, "key"), DueAt: at(t, "due")}
				if err := m.Schedule(ctx, tc(u), e); err != nil {
					t.Fatal(err)
				}
			},
			"unschedule": func(t *rapid.T) {
				u := users.Draw(t, "user")
				if err := m.Unschedule(ctx, tc(u), keys.Draw(t, "key")); err != nil {
					t.Fatal(err)
				}
			},
			"claim": func(t *rapid.T) {
				ks := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Key {
					return Key{UserID: users.Draw(t, "user"), WorkKey: keys.Draw(t, "key")}
				}), 0, 6).Draw(t, "keys")
				now := at(t, "now")
				got, err := m.Claim(ctx, ks, now, now.Add(time.Duration(rapid.IntRange(1, 10).Draw(t, "for"))*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				claims = append(claims, got...)
			},
			"complete": func(t *rapid.T) {
				if len(claims) == 0 {
					t.Skip("no claims")
				}
				c := rapid.SampledFrom(claims).Draw(t, "claim")
				next := c.Entry
				next.DueAt = at(t, "due")
				err := m.Complete(ctx, tc(c.Entry.UserID), c, next)
				if err != nil && !errors.Is(err, ErrClaimLost) {
					t.Fatal(err)
				}
			},
			"read": func(t *rapid.T) {
				now := at(t, "now")
				if _, err := m.DueHeads(ctx, now, 2); err != nil {
					t.Fatal(err)
				}
				if _, err := m.DueBefore(ctx, now, 3); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) { m.check(t) },
		})
	})
}

// TestTimeRoundTrip pins that stored times come back Equal, the zero time as the zero time,
// across the whole range of time.Time.
func TestTimeRoundTrip(t *testing.T) {
	for _, tm := range []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1600, 5, 6, 7, 8, 9, 999_999_999, time.UTC),
		time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.FixedZone("x", 3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
	} {
		got := joinTime(splitTime(tm))
		if !got.Equal(tm) || got.IsZero() != tm.IsZero() {
			t.Errorf("round trip of %v gave %v", tm, got)
		}
	}
	if joinTime(splitTime(time.Time{})) != (time.Time{}) {
		t.Errorf("the zero time does not come back as time.Time{}")
	}
}

func TestNodeSize(t *testing.T) {
	// The per-entry budget (see BenchmarkMemoryPerEntry) rests on a node filling one
	// 128-byte size class.
	if s := unsafe.Sizeof(node{}); s != 128 {
		t.Errorf("node is %d bytes, want 128", s)
	}
}
