package tenancy

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// acceptable is the reference rule for IDs, written independently of ValidateID.
func acceptable(id string) bool {
	if id == "" || len(id) > MaxIDLength || !utf8.ValidString(id) {
		return false
	}
	return !strings.ContainsFunc(id, unicode.IsControl)
}

func TestContext(t *testing.T) {
	var zero Context
	if zero.Valid() || zero.Check() != ErrNoTenant || zero.UserID() != "" {
		t.Fatalf("zero Context: Valid %v, Check %v, UserID %q; want invalid, ErrNoTenant, empty",
			zero.Valid(), zero.Check(), zero.UserID())
	}
	tc, err := NewContext("user-42")
	if err != nil || !tc.Valid() || tc.Check() != nil || tc.UserID() != "user-42" {
		t.Fatalf("NewContext(user-42) = %v, %v", tc, err)
	}
	if err := ValidateID("WorkKey", ""); err == nil || !strings.Contains(err.Error(), "WorkKey") {
		t.Fatalf("ValidateID(WorkKey, \"\") = %v, want an error naming WorkKey", err)
	}
}

// FuzzNewContext: NewContext accepts exactly the IDs the reference rule accepts; an accepted
// ID comes back unchanged, a refused one gives the zero Context and ErrInvalidID.
func FuzzNewContext(f *testing.F) {
	for _, id := range badIDs {
		f.Add(id)
	}
	for _, id := range []string{"alice", "a/b", "é", "user 42", "\u202e", strings.Repeat("x", MaxIDLength)} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := acceptable(id)
		verr := ValidateID("user ID", id)
		tc, err := NewContext(id)
		if want {
			if verr != nil || err != nil || !tc.Valid() || tc.UserID() != id {
				t.Fatalf("NewContext(%q) = %v, %v (ValidateID %v); want accepted unchanged", id, tc, err, verr)
			}
			return
		}
		if !errors.Is(verr, ErrInvalidID) || !errors.Is(err, ErrInvalidID) || tc != (Context{}) {
			t.Fatalf("NewContext(%q) = %v, %v (ValidateID %v); want the zero Context and ErrInvalidID", id, tc, err, verr)
		}
		if !strings.Contains(err.Error(), "user ID") {
			t.Fatalf("NewContext(%q) error %q does not name the field", id, err)
		}
	})
}
