package tenancy

import (
	"errors"

	"github.com/rotaworks/rota/internal/vocab"
)

// MaxIDLength is the longest user ID, slug or row ID, in bytes, that this package accepts:
// 256.
const MaxIDLength = vocab.MaxNameLength

var (
	// ErrNoTenant is returned by every call that takes a Context when it is given the zero
	// Context.
	ErrNoTenant = errors.New("tenancy: no tenant context")
	// ErrInvalidID is returned for bad input: by NewContext and by repository and watchlist
	// calls for an ID that ValidateID refuses, and by Watchlist.Add for an entry whose
	// AddedAt lies outside years 1 to 9999 UTC.
	ErrInvalidID = errors.New("tenancy: invalid id")
	// ErrNotFound is returned when a row does not exist for the calling tenant — including
	// when it exists for another tenant: the two cases are indistinguishable by design.
	ErrNotFound = errors.New("tenancy: not found")
	// ErrForbidden is returned by Watchlist.Add when the entry names a different user than
	// the Context. Such an entry is refused, never rewritten.
	ErrForbidden = errors.New("tenancy: forbidden")
)

// Context is a validated tenant identity: the only key that opens tenant-scoped storage.
// Make one with [NewContext]; the zero Context is invalid and refused with [ErrNoTenant].
type Context struct {
	userID string
}

// NewContext returns the Context for userID, or an error wrapping [ErrInvalidID] that says
// what is wrong with it.
func NewContext(userID string) (Context, error) {
	if err := ValidateID("user ID", userID); err != nil {
		return Context{}, err
	}
	return Context{userID: userID}, nil
}

// UserID returns the tenant's user ID; it is "" only for the zero Context.
func (c Context) UserID() string { return c.userID }

// Check returns ErrNoTenant for the zero Context and nil for one NewContext made.
// Implementations of the tenant-scoped interfaces call it first.
func (c Context) Check() error {
	if c.userID == "" {
		return ErrNoTenant
	}
	return nil
}

// ValidateID checks an identifier: non-empty, at most MaxIDLength bytes, valid UTF-8, no
// control or format characters (Unicode Cc and Cf: NUL, newline, DEL, the zero-width space,
// U+FEFF, bidi controls, the zero-width joiner) anywhere, and no white space (unicode.IsSpace)
// at either end; white space inside is allowed. what names the field in the error, which wraps
// ErrInvalidID and quotes the value and, for a bad character, its code point. ValidateID does
// not normalise: see the package documentation. It costs one pass over id. Every rota
// package and adapter checks its names by this rule: work keys, tiers, groups, lanes, and
// maintenance's task, holder and lease names.
func ValidateID(what, id string) error { return vocab.Name(ErrInvalidID, what, id) }
