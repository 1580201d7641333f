// Package vocab holds the rules that every rota package and adapter applies to what it
// stores, so that a valid name, a storable time and a limit mean the same thing in
// tenancy, duework, maintenance, bridge, inspect and the PostgreSQL adapter:
//
//   - a name (a user ID, slug, work key, tier, group, lane, task, holder or lease name) is
//     1 to [MaxNameLength] bytes of valid UTF-8 with no control or format character
//     (Unicode Cc and Cf) anywhere and no white space at either end ([Name]);
//   - a stored time lies in years 1 to 9999 UTC, both included: [MinTime] to [MaxTime]
//     ([Time]);
//   - a count a call takes lies in [1, [MaxLimit]] ([Limit]); other ranges go through
//     [Range].
//
// Every check takes the sentinel of the package that calls it and wraps it, so that each
// package returns its own error (tenancy.ErrInvalidID, duework.ErrInvalid,
// maintenance.ErrInvalid) with the same words and the field it was given. The checks
// allocate only when they fail.
package vocab

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength is the longest name, in bytes.
const MaxNameLength = 256

// NameRule says in words what [Name] accepts, for messages that describe the rule rather
// than one failure.
const NameRule = "1 to 256 bytes of valid UTF-8 without control or format characters, not beginning or ending with white space"

// MaxLimit is the largest count a call takes: a limit, a page size, a per-user cap.
const MaxLimit = 1 << 20

// MaxWeight is the largest flow-control weight a user may have.
const MaxWeight = 1000

// The range of stored times, both ends included: the zero time.Time (January 1 of year 1,
// UTC), which stands for "never", and the last nanosecond of year 9999 UTC. Times beyond
// it are refused, where a database driver would silently wrap them. Nothing assigns them.
var (
	MinTime = time.Time{}
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// Name returns nil for a valid name, and otherwise an error wrapping sentinel that names
// field, quotes s and, for a bad character, gives its code point: "field is empty",
// "field is 300 bytes, longer than 256", "field "a\n" contains control character
// U+000A". It does not normalise s. One pass over s.
func Name(sentinel error, field, s string) error {
	if p := Problem(field, s); p != "" {
		return fmt.Errorf("%w: %s", sentinel, p)
	}
	return nil
}

// ValidName reports whether [Name] accepts s, without allocating. A name of printable
// ASCII, the common case, is checked a byte at a time, with no rune decoding.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLength {
		return false
	}
	if ascii, ok := validASCII(s); ascii {
		return ok
	}
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if badRune(r) {
			return false
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return !unicode.IsSpace(first) && !unicode.IsSpace(last)
}

// validASCII reports whether s is all ASCII and, if it is, whether it is a valid name:
// ASCII holds no format character, its control characters are below 0x20 and 0x7F, and
// the space is its only white space that is not a control character.
func validASCII(s string) (ascii, ok bool) {
	ok = s[0] != ' ' && s[len(s)-1] != ' '
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return false, false
		case c < 0x20 || c == 0x7f:
			ok = false
		}
	}
	return true, ok
}

// badRune reports whether a name may hold r nowhere: a control or format character.
func badRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// Problem says what [Name] refuses in s, naming field, or returns "" for a valid name.
// Config checks use it to put the reason inside a message of their own.
func Problem(field, s string) string {
	if ValidName(s) {
		return ""
	}
	switch {
	case s == "":
		return fmt.Sprintf("%s is empty", field)
	case len(s) > MaxNameLength:
		return fmt.Sprintf("%s is %d bytes, longer than %d", field, len(s), MaxNameLength)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%s %q is not valid UTF-8", field, s)
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("%s %q contains control character %U", field, s, r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("%s %q contains format character %U", field, s, r)
		}
	}
	if r, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(r) {
		return fmt.Sprintf("%s %q begins with white space %U", field, s, r)
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return fmt.Sprintf("%s %q ends with white space %U", field, s, r)
}

// ValidTime reports whether t lies in [MinTime, MaxTime].
func ValidTime(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }

// Time returns nil when t lies in [MinTime, MaxTime], and otherwise an error wrapping
// sentinel that names field and gives t.
func Time(sentinel error, field string, t time.Time) error {
	if !ValidTime(t) {
		return fmt.Errorf("%w: %s %s is outside years 1 to 9999 UTC", sentinel, field, t.Format(time.RFC3339Nano))
	}
	return nil
}

// ClaimWindow checks the times of a claim made at now that lasts until until: both in
// [MinTime, MaxTime] and until after now. The error wraps sentinel and names "now" or
// "until".
func ClaimWindow(sentinel error, now, until time.Time) error {
	if err := Time(sentinel, "now", now); err != nil {
		return err
	}
	if err := Time(sentinel, "until", until); err != nil {
		return err
	}
	if !until.After(now) {
		return fmt.Errorf("%w: until %s is not after now %s", sentinel, until.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	return nil
}

// LeaseCall checks the arguments of a lease's Acquire or Renew: holder a valid name, ttl
// positive and now in [MinTime, MaxTime]. The error wraps sentinel and names the field.
func LeaseCall(sentinel error, holder string, ttl time.Duration, now time.Time) error {
	if err := Name(sentinel, "holder", holder); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl must be positive, got %v", sentinel, ttl)
	}
	return Time(sentinel, "now", now)
}

// LeaseExpiry is the expiry of a lease granted at acquired and renewed at now for ttl:
// now+ttl capped at acquired+maxHold, or an error wrapping sentinel when that lies outside
// [MinTime, MaxTime].
func LeaseExpiry(sentinel error, acquired, now time.Time, ttl, maxHold time.Duration) (time.Time, error) {
	exp := now.Add(ttl)
	if capAt := acquired.Add(maxHold); exp.After(capAt) {
		exp = capAt
	}
	if err := Time(sentinel, "expiry now + ttl", exp); err != nil {
		return time.Time{}, err
	}
	return exp, nil
}

// Limit returns nil when n lies in [1, MaxLimit], and otherwise an error wrapping
// sentinel: "field must be in [1, 1048576], got 0".
func Limit(sentinel error, field string, n int) error { return Range(sentinel, field, n, 1, MaxLimit) }

// Range returns nil when n lies in [lo, hi], and otherwise an error wrapping sentinel:
// "field must be in [lo, hi], got n".
func Range(sentinel error, field string, n, lo, hi int) error {
	if n < lo || n > hi {
		return fmt.Errorf("%w: %s must be in [%d, %d], got %d", sentinel, field, lo, hi, n)
	}
	return nil
}

// Each calls check on every element of xs in order and returns the first error, prefixed
// with field and the element's index: "entries[3]: …".
func Each[T any](field string, xs []T, check func(T) error) error {
	for i, x := range xs {
		if err := check(x); err != nil {
			return fmt.Errorf("%s[%d]: %w", field, i, err)
		}
	}
	return nil
}
