package maintenance

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rotaworks/rota/internal/vocab"
)

// validName checks a task, holder or lease name by the package's name rule (see Names
// and times in the package documentation). what names the field in the error, which
// wraps ErrInvalid.
func validName(what, name string) error { return vocab.Name(ErrInvalid, what, name) }

// validTime checks that a store can hold t: years 1 to 9999 UTC, the zero time included.
// what names the field in the error, which wraps ErrInvalid.
func validTime(what string, t time.Time) error { return vocab.Time(ErrInvalid, what, t) }

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
