package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// wireVersion is the version EncodeItem writes and the only one DecodeItem reads.
const wireVersion = 1

// wireTimeLayout is RFC 3339 in UTC with all nine digits of nanoseconds.
const wireTimeLayout = "2006-01-02T15:04:05.000000000Z"

// wireItem is an item on the wire; its fields are in the order EncodeItem writes them.
type wireItem struct {
	V     int       `json:"v"`
	Lane  string    `json:"lane"`
	Token string    `json:"token"`
	Until wireTime  `json:"until"`
	Entry wireEntry `json:"entry"`
}

type wireEntry struct {
	UserID     string   `json:"user_id"`
	WorkKey    string   `json:"work_key"`
	Tier       string   `json:"tier"`
	DueAt      wireTime `json:"due_at"`
	LastRunAt  wireTime `json:"last_run_at"`
	MissStreak int      `json:"miss_streak"`
	// ErrorStreak is left out when 0, so that such an item reads as it did before the
	// field existed, in both directions of a rolling upgrade.
	ErrorStreak int `json:"error_streak,omitempty"`
}

var (
	wireItemKeys  = []string{"v", "lane", "token", "until", "entry"}
	wireEntryKeys = []string{"user_id", "work_key", "tier", "due_at", "last_run_at", "miss_streak"}
	// wireEntryOptional are the entry's keys that may be missing, meaning 0.
	wireEntryOptional = []string{"error_streak"}
)

// wireTime is a time as the wire holds it: the string of wireTimeLayout, or the number 0
// for the zero time.
type wireTime struct{ time.Time }

func (t wireTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("0"), nil
	}
	return []byte(`"` + t.UTC().Format(wireTimeLayout) + `"`), nil
}

func (t *wireTime) UnmarshalJSON(b []byte) error {
	if string(b) == "0" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a time must be 0 or a string, got %s", b)
	}
	parsed, err := time.Parse(wireTimeLayout, s)
	if err != nil || parsed.Format(wireTimeLayout) != s {
		return fmt.Errorf("time %q is not RFC 3339 in UTC with nine digits of nanoseconds (%s)", s, wireTimeLayout)
	}
	t.Time = parsed
	return nil
}

// EncodeItem returns item in the wire form DecodeItem reads, for a host that hands items
// to its own queue (see the package doc, "Wire form"). It refuses, wrapping
// duework.ErrInvalid, what DecodeItem would refuse: a zero or out-of-range Until, an entry
// that fails validation, or a lane that is not a valid name.
func EncodeItem(item dispatch.Item) ([]byte, error) {
	if err := checkWireItem(item); err != nil {
		return nil, fmt.Errorf("%w: EncodeItem: %w", duework.ErrInvalid, err)
	}
	c := item.Claim
	e := c.Entry
	return json.Marshal(wireItem{
		V: wireVersion, Lane: string(item.Lane), Token: strconv.FormatUint(c.Token, 10), Until: wireTime{c.Until},
		Entry: wireEntry{UserID: e.UserID, WorkKey: e.WorkKey, Tier: e.Tier, DueAt: wireTime{e.DueAt},
			LastRunAt: wireTime{e.LastRunAt}, MissStreak: e.MissStreak, ErrorStreak: e.ErrorStreak},
	})
}

// DecodeItem reads an item EncodeItem wrote. The item equals the encoded one field by
// field, its times in UTC and equal under time.Time.Equal. It refuses, wrapping
// duework.ErrInvalid and saying why, anything else: malformed or truncated JSON, a version
// other than 1, a missing or unknown field (names match exactly; error_streak alone may be
// missing, meaning 0), anything but
// white space after the object, a time or token not in the wire's form, a zero Until, an
// entry that fails duework.Entry.Validate and a lane that is not a valid name.
//
// A decoded item is trusted no more than a forged one: Worker.Do and RunDueItem check its
// claim against the Index before they run anything.
func DecodeItem(b []byte) (dispatch.Item, error) {
	item, err := decodeItem(b)
	if err != nil {
		return dispatch.Item{}, fmt.Errorf("%w: DecodeItem: %w", duework.ErrInvalid, err)
	}
	return item, nil
}

func decodeItem(b []byte) (dispatch.Item, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return dispatch.Item{}, err
	}
	if v, ok := obj["v"]; ok && string(v) != strconv.Itoa(wireVersion) {
		return dispatch.Item{}, fmt.Errorf("unknown version %s (want %d)", v, wireVersion)
	}
	if err := exactKeys(obj, "item", wireItemKeys, "entry", wireEntryKeys); err != nil {
		return dispatch.Item{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w wireItem
	if err := dec.Decode(&w); err != nil {
		return dispatch.Item{}, err
	}
	if rest := b[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return dispatch.Item{}, fmt.Errorf("%d bytes after the item", len(rest))
	}
	if w.V != wireVersion {
		return dispatch.Item{}, fmt.Errorf("unknown version %d (want %d)", w.V, wireVersion)
	}
	token, err := strconv.ParseUint(w.Token, 10, 64)
	if err != nil || strconv.FormatUint(token, 10) != w.Token {
		return dispatch.Item{}, fmt.Errorf("token %q is not a decimal uint64", w.Token)
	}
	e := w.Entry
	item := dispatch.Item{Lane: dispatch.Lane(w.Lane), Claim: duework.Claim{Token: token, Until: w.Until.Time,
		Entry: duework.Entry{UserID: e.UserID, WorkKey: e.WorkKey, Tier: e.Tier, DueAt: e.DueAt.Time,
			LastRunAt: e.LastRunAt.Time, MissStreak: e.MissStreak, ErrorStreak: e.ErrorStreak}}}
	return item, checkWireItem(item)
}

// checkWireItem checks what the wire refuses of an item whatever its form.
func checkWireItem(item dispatch.Item) error {
	c := item.Claim
	if c.Until.IsZero() {
		return fmt.Errorf("the claim's Until is zero")
	}
	if err := vocab.Time(duework.ErrInvalid, "Until", c.Until); err != nil {
		return err
	}
	if item.Lane != "" {
		if err := vocab.Name(duework.ErrInvalid, "lane", string(item.Lane)); err != nil {
			return err
		}
	}
	tc, err := tenancy.NewContext(c.Entry.UserID)
	if err != nil {
		return fmt.Errorf("entry: %w", err)
	}
	if err := c.Entry.Validate(tc); err != nil {
		return fmt.Errorf("entry: %w", err)
	}
	return nil
}

// exactKeys checks that obj holds exactly the keys want, and that its member sub is an
// object holding exactly subWant: encoding/json alone would match keys regardless of
// case.
func exactKeys(obj map[string]json.RawMessage, what string, want []string, sub string, subWant []string) error {
	if err := sameKeys(what, obj, want, nil); err != nil {
		return err
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(obj[sub], &inner); err != nil || inner == nil {
		return fmt.Errorf("%s must be an object", sub)
	}
	return sameKeys(sub, inner, subWant, wireEntryOptional)
}

// sameKeys checks that obj holds every key of want, and no key that is neither in want
// nor in optional.
func sameKeys(what string, obj map[string]json.RawMessage, want, optional []string) error {
	for k := range obj {
		if !slices.Contains(want, k) && !slices.Contains(optional, k) {
			return fmt.Errorf("%s has an unknown field %q", what, k)
		}
	}
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("%s lacks the field %q", what, k)
		}
	}
	return nil
}
