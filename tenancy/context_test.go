package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestContext(t *testing.T) {
	var zero Context
	if zero.Check() != ErrNoTenant || zero.UserID() != "" {
		t.Fatalf("zero Context: Check %v, UserID %q; want ErrNoTenant, empty", zero.Check(), zero.UserID())
	}
	tc, err := NewContext("user-42")
	if err != nil || tc.Check() != nil || tc.UserID() != "user-42" {
		t.Fatalf("NewContext(user-42) = %v, %v", tc, err)
	}
}

// The errors of ValidateID name the field, quote the value and give the offending code
// point.
func TestValidateIDMessages(t *testing.T) {
	tests := []struct{ id, want string }{
		{"", `tenancy: invalid id: tier is empty`},
		{strings.Repeat("x", MaxIDLength+1), `tenancy: invalid id: tier is 257 bytes, longer than 256`},
		{"a\xffb", `tenancy: invalid id: tier "a\xffb" is not valid UTF-8`},
		{"eve\n", `tenancy: invalid id: tier "eve\n" contains control character U+000A`},
		{"acme corp ", `tenancy: invalid id: tier "acme corp " ends with white space U+0020`},
		{"\u00a0acme", `tenancy: invalid id: tier "\u00a0acme" begins with white space U+00A0`},
		{"\u200b", `tenancy: invalid id: tier "\u200b" contains format character U+200B`},
		{"ac\u202eme", `tenancy: invalid id: tier "ac\u202eme" contains format character U+202E`},
		{"\ufeffacme", `tenancy: invalid id: tier "\ufeffacme" contains format character U+FEFF`},
	}
	for _, tt := range tests {
		err := ValidateID("tier", tt.id)
		if !errors.Is(err, ErrInvalidID) || err.Error() != tt.want {
			t.Errorf("ValidateID(tier, %q) = %v\nwant %s", tt.id, err, tt.want)
		}
	}
	for _, id := range []string{"acme corp", "jos\u00e9", "jose\u0301", "a/b", "é", "user 42", "Ünïcödé ✓", strings.Repeat("é", MaxIDLength/2)} {
		if err := ValidateID("tier", id); err != nil {
			t.Errorf("ValidateID(tier, %q) = %v, want accepted", id, err)
		}
	}
}

// Composed and decomposed spellings of one name are two IDs: tenancy does not normalise.
func TestIDsAreNotNormalised(t *testing.T) {
	composed, decomposed := mustContext(t, "jos\u00e9"), mustContext(t, "jose\u0301")
	if composed == decomposed || composed.UserID() == decomposed.UserID() {
		t.Fatalf("the two spellings of José made one tenant")
	}
}

// Watch-list entries are checked in one order, whatever else is wrong with them, so that
// every implementation refuses alike.
func TestWatchlistEntryValidateOrder(t *testing.T) {
	bob := mustContext(t, "bob")
	bad := WatchlistEntry{UserID: "eve", Slug: "", Tier: "", AddedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	steps := []struct {
		fix   func(e *WatchlistEntry)
		want  error
		field string
	}{
		{func(*WatchlistEntry) {}, ErrInvalidID, "slug"},
		{func(e *WatchlistEntry) { e.Slug = "jobs" }, ErrForbidden, `"eve"`},
		{func(e *WatchlistEntry) { e.UserID = "bob" }, ErrInvalidID, "tier"},
		{func(e *WatchlistEntry) { e.Tier = "hot" }, ErrInvalidID, "AddedAt"},
		{func(e *WatchlistEntry) { e.AddedAt = time.Time{} }, nil, ""},
	}
	if err := bad.Validate(Context{}); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("Validate(zero Context) = %v, want ErrNoTenant first", err)
	}
	e := bad
	for _, s := range steps {
		s.fix(&e)
		err := e.Validate(bob)
		if !errors.Is(err, s.want) || (err != nil && !strings.Contains(err.Error(), s.field)) || (s.want == nil && err != nil) {
			t.Fatalf("Validate(%+v) = %v, want %v naming %s", e, err, s.want, s.field)
		}
	}
}

func mustContext(t testing.TB, userID string) Context {
	t.Helper()
	tc, err := NewContext(userID)
	if err != nil {
		t.Fatalf("NewContext(%q) = %v", userID, err)
	}
	return tc
}

// offending returns the runes that make id a bad ID, written independently of ValidateID:
// any control (Cc) or format (Cf) character, and white space at either end.
func offending(id string) []rune {
	var out []rune
	for _, r := range id {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			out = append(out, r)
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	for _, r := range []rune{first, last} {
		if unicode.IsSpace(r) {
			out = append(out, r)
		}
	}
	return out
}

// FuzzValidateID: ValidateID never panics; it accepts exactly the IDs that are non-empty,
// at most MaxIDLength bytes, valid UTF-8 and free of offending runes; an accepted ID makes a
// Context that gives it back unchanged; a refused one gives the zero Context and an error
// wrapping ErrInvalidID that names the field and, for an offending rune, quotes the value
// and names one such rune.
func FuzzValidateID(f *testing.F) {
	for _, id := range []string{
		"", "alice", "a/b", "é", "user 42", "acme corp", "acme corp ", " acme", "\u200b", "a\u200bb",
		"\ufeffabc", "a\u202eb", "jos\u00e9", "jose\u0301", "\u00a0x", "x\u3000", "a\x00b", "a\nb",
		"a\u0085b", "a\xffb", "\U0001F468\u200d\U0001F469", strings.Repeat("x", MaxIDLength),
		strings.Repeat("x", MaxIDLength+1), strings.Repeat("é", MaxIDLength/2) + "x",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		bad := offending(id)
		want := id != "" && len(id) <= MaxIDLength && utf8.ValidString(id) && len(bad) == 0
		err := ValidateID("user ID", id)
		tc, cerr := NewContext(id)
		if want {
			if err != nil || cerr != nil || tc.Check() != nil || tc.UserID() != id {
				t.Fatalf("ValidateID(%q) = %v, NewContext = %v, %v; want accepted unchanged", id, err, tc, cerr)
			}
			return
		}
		if !errors.Is(err, ErrInvalidID) || !errors.Is(cerr, ErrInvalidID) || tc != (Context{}) {
			t.Fatalf("ValidateID(%q) = %v, NewContext = %v, %v; want ErrInvalidID and the zero Context", id, err, tc, cerr)
		}
		msg := err.Error()
		if !strings.Contains(msg, "user ID") || cerr.Error() != msg {
			t.Fatalf("ValidateID(%q) = %q, NewContext's %q: want one error naming the field", id, msg, cerr)
		}
		if id == "" || len(id) > MaxIDLength || !utf8.ValidString(id) {
			return
		}
		if !strings.Contains(msg, strconv.Quote(id)) {
			t.Fatalf("ValidateID(%q) = %q, want the value quoted", id, msg)
		}
		named := false
		for _, r := range bad {
			named = named || strings.Contains(msg, fmt.Sprintf("%U", r))
		}
		if !named {
			t.Fatalf("ValidateID(%q) = %q, want it to name one of %U", id, msg, bad)
		}
	})
}

// The in-memory implementations refuse a done ctx before they look at anything else, and
// check a watch-list entry only after the Context and ctx.
func TestMemoryChecksContextsFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := mustContext(t, "alice")
	bad := WatchlistEntry{UserID: "eve"}
	var w MemoryWatchlist
	if err := w.Add(ctx, a, bad); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add(done ctx, bad entry) = %v, want context.Canceled", err)
	}
	if err := w.Add(ctx, Context{}, bad); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("Add(done ctx, zero Context) = %v, want ErrNoTenant", err)
	}
	var r MemoryRepository[int]
	if err := r.Put(ctx, a, "", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put(done ctx, empty id) = %v, want context.Canceled", err)
	}
}
