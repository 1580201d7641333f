package maintenance

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength is the longest task, holder or lease name, in bytes, that this package and
// its adapters accept.
const MaxNameLength = 256

// The range of times a Lease or StateStore stores: years 1 through 9999 UTC. The zero
// time, "never" in TaskState, is its first instant.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // exclusive
)

// ValidateName checks a task, holder or lease name: non-empty, at most MaxNameLength
// bytes, valid UTF-8, free of control characters. what names the field in the error,
// which wraps ErrInvalid. Lease and StateStore adapters call it before they send a name,
// so that every store refuses the same names.
func ValidateName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(name), MaxNameLength)
	}
	return validateText(what, name, true)
}

// validateText checks text that a store keeps: valid UTF-8 without NUL and, when
// noControl, without any control character.
func validateText(what, s string, noControl bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %s is not valid UTF-8", ErrInvalid, what, quote(s))
	}
	for _, r := range s {
		if r == 0 || (noControl && unicode.IsControl(r)) {
			return fmt.Errorf("%w: %s %s contains control character %U", ErrInvalid, what, quote(s), r)
		}
	}
	return nil
}

// quote quotes s for an error message, cut to its first 64 bytes.
func quote(s string) string {
	const n = 64
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:n], len(s))
}

// sanitizeText makes s storable text: invalid UTF-8 and NUL become U+FFFD.
func sanitizeText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ValidateTime checks that a store can hold t: years 1 through 9999 UTC, the zero time
// included. what names the field in the error, which wraps ErrInvalid. Adapters call it
// before they send a time, so a time outside the range is refused rather than stored as
// another one.
func ValidateTime(what string, t time.Time) error {
	if t.Before(minTime) || !t.Before(maxTime) {
		return fmt.Errorf("%w: %s %v is outside years 1 through 9999 UTC", ErrInvalid, what, t)
	}
	return nil
}
