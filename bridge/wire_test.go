package bridge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// wireItem is the item the wire tests encode.
var wireItem = dispatch.Item{Lane: "pro", Claim: duework.Claim{Token: 18446744073709551615, Until: t0.Add(90*time.Second + 7),
	Entry: duework.Entry{UserID: "ann", WorkKey: "jobs/board?id=1", Tier: "hot", DueAt: t0.Add(-time.Minute), MissStreak: 3}}}

// wireForm is wireItem as EncodeItem writes it.
const wireForm = `{"v":1,"lane":"pro","token":"18446744073709551615","until":"2026-11-30T12:01:30.000000007Z",` +
	`"entry":{"user_id":"ann","work_key":"jobs/board?id=1","tier":"hot","due_at":"2026-11-30T11:59:00.000000000Z","last_run_at":0,"miss_streak":3}}`

// equalItems compares items field by field, times under time.Time.Equal.
func equalItems(a, b dispatch.Item) bool {
	return cmp.Equal(a, b, cmp.Comparer(func(x, y time.Time) bool { return x.Equal(y) }))
}

func TestEncodeItemWritesTheDocumentedForm(t *testing.T) {
	b, err := bridge.EncodeItem(wireItem)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != wireForm {
		t.Fatalf("EncodeItem =\n%s\nwant\n%s", b, wireForm)
	}
	got, err := bridge.DecodeItem(b)
	if err != nil || !equalItems(got, wireItem) {
		t.Fatalf("DecodeItem = %+v, %v; want %+v", got, err, wireItem)
	}
	if got.Claim.Until.Location() != time.UTC {
		t.Errorf("decoded Until in %v, want UTC", got.Claim.Until.Location())
	}
	// Times in any zone encode as the same instant in UTC.
	zoned := wireItem
	zoned.Claim.Until = wireItem.Claim.Until.In(time.FixedZone("x", 5*3600))
	if b, err := bridge.EncodeItem(zoned); err != nil || string(b) != wireForm {
		t.Fatalf("EncodeItem of a zoned time = %s, %v; want the UTC form", b, err)
	}
	// Trailing white space is not data.
	if _, err := bridge.DecodeItem([]byte(wireForm + "\n ")); err != nil {
		t.Errorf("DecodeItem with a trailing newline: %v", err)
	}
}

func TestEncodeItemRefusesWhatDecodeItemWould(t *testing.T) {
	for name, mod := range map[string]func(*dispatch.Item){
		"zero Until":        func(it *dispatch.Item) { it.Claim.Until = time.Time{} },
		"Until beyond 9999": func(it *dispatch.Item) { it.Claim.Until = vocab.MaxTime.Add(1) },
		"empty UserID":      func(it *dispatch.Item) { it.Claim.Entry.UserID = "" },
		"zero DueAt":        func(it *dispatch.Item) { it.Claim.Entry.DueAt = time.Time{} },
		"negative streak":   func(it *dispatch.Item) { it.Claim.Entry.MissStreak = -1 },
		"bad lane":          func(it *dispatch.Item) { it.Lane = " pro" },
	} {
		it := wireItem
		mod(&it)
		if b, err := bridge.EncodeItem(it); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("%s: EncodeItem = %s, %v; want ErrInvalid", name, b, err)
		}
	}
}

func TestDecodeItemRefusesBadInput(t *testing.T) {
	swap := func(old, new string) string {
		if !strings.Contains(wireForm, old) {
			t.Fatalf("the wire form lacks %s", old)
		}
		return strings.Replace(wireForm, old, new, 1)
	}
	for name, in := range map[string]string{
		"empty":                 "",
		"garbage":               "\x00\xff not json",
		"null":                  "null",
		"array":                 "[]",
		"truncated":             wireForm[:len(wireForm)-1],
		"trailing bytes":        wireForm + "x",
		"a second object":       wireForm + "{}",
		"version 2":             swap(`"v":1`, `"v":2`),
		"version 0":             swap(`"v":1`, `"v":0`),
		"version 1.0":           swap(`"v":1`, `"v":1.0`),
		"no version":            swap(`"v":1,`, ``),
		"unknown field":         swap(`"v":1`, `"v":1,"payload":"secret"`),
		"unknown entry field":   swap(`"miss_streak":3`, `"miss_streak":3,"body":"x"`),
		"field in other case":   swap(`"lane"`, `"Lane"`),
		"no entry":              swap(`,"entry":{"user_id":"ann","work_key":"jobs/board?id=1","tier":"hot","due_at":"2026-11-30T11:59:00.000000000Z","last_run_at":0,"miss_streak":3}`, ``),
		"entry not an object":   swap(`"entry":{`, `"entry":[{`) + "]",
		"missing entry field":   swap(`,"last_run_at":0`, ``),
		"token as a number":     swap(`"token":"18446744073709551615"`, `"token":18446744073709551615`),
		"token overflows":       swap(`"18446744073709551615"`, `"18446744073709551616"`),
		"token with a sign":     swap(`"18446744073709551615"`, `"+1"`),
		"token leading zero":    swap(`"18446744073709551615"`, `"01"`),
		"empty token":           swap(`"18446744073709551615"`, `""`),
		"zero Until":            swap(`"until":"2026-11-30T12:01:30.000000007Z"`, `"until":0`),
		"Until in a zone":       swap(`"2026-11-30T12:01:30.000000007Z"`, `"2026-11-30T13:01:30.000000007+01:00"`),
		"Until short nanos":     swap(`"2026-11-30T12:01:30.000000007Z"`, `"2026-11-30T12:01:30.7Z"`),
		"Until not a date":      swap(`"2026-11-30T12:01:30.000000007Z"`, `"2026-11-31T12:01:30.000000007Z"`),
		"time as a bool":        swap(`"last_run_at":0`, `"last_run_at":false`),
		"time as 0.0":           swap(`"last_run_at":0`, `"last_run_at":0.0`),
		"zero DueAt":            swap(`"due_at":"2026-11-30T11:59:00.000000000Z"`, `"due_at":0`),
		"year 0":                swap(`"2026-11-30T11:59:00.000000000Z"`, `"0000-11-30T11:59:00.000000000Z"`),
		"invalid user":          swap(`"user_id":"ann"`, `"user_id":""`),
		"user with a newline":   swap(`"user_id":"ann"`, `"user_id":"a\nn"`),
		"invalid work key":      swap(`"work_key":"jobs/board?id=1"`, `"work_key":" x"`),
		"negative streak":       swap(`"miss_streak":3`, `"miss_streak":-3`),
		"streak beyond max":     swap(`"miss_streak":3`, `"miss_streak":1073741825`),
		"lane with white space": swap(`"lane":"pro"`, `"lane":"pro "`),
	} {
		if item, err := bridge.DecodeItem([]byte(in)); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("%s: DecodeItem(%q) = %+v, %v; want ErrInvalid", name, in, item, err)
		}
	}
}

// validItem draws an item that EncodeItem takes: valid IDs, times anywhere in years 1 to
// 9999 at any nanosecond, a zero LastRunAt now and then, any token.
func validItem(t *rapid.T) dispatch.Item {
	id := rapid.StringMatching(`[a-zA-Z0-9][a-zA-Z0-9 ._/:@é世-]{0,30}[a-zA-Z0-9]`)
	when := func(label string) time.Time {
		sec := rapid.Int64Range(vocab.MinTime.Unix(), vocab.MaxTime.Unix()).Draw(t, label+" seconds")
		return time.Unix(sec, int64(rapid.IntRange(0, 999999999).Draw(t, label+" nanos"))).In(time.FixedZone("z", rapid.IntRange(-12, 12).Draw(t, label+" zone")*3600))
	}
	e := duework.Entry{UserID: id.Draw(t, "user"), WorkKey: id.Draw(t, "work key"), DueAt: when("due"),
		MissStreak: rapid.IntRange(0, duework.MaxMissStreak).Draw(t, "streak"), ErrorStreak: rapid.IntRange(0, duework.MaxMissStreak).Draw(t, "error streak")}
	if e.DueAt.IsZero() {
		e.DueAt = e.DueAt.Add(1)
	}
	if rapid.Bool().Draw(t, "tier") {
		e.Tier = id.Draw(t, "tier name")
	}
	if rapid.Bool().Draw(t, "has run") {
		e.LastRunAt = when("last run")
	}
	c := duework.Claim{Entry: e, Token: rapid.Uint64().Draw(t, "token"), Until: when("until")}
	if c.Until.IsZero() {
		c.Until = c.Until.Add(1)
	}
	var lane dispatch.Lane
	if rapid.Bool().Draw(t, "lane") {
		lane = dispatch.Lane(id.Draw(t, "lane name"))
	}
	return dispatch.Item{Claim: c, Lane: lane}
}

// TestWireRoundTrip: every valid item decodes back to itself, and its form is canonical:
// encoding the decoded item gives the same bytes.
func TestWireRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		it := validItem(t)
		b, err := bridge.EncodeItem(it)
		if err != nil {
			t.Fatalf("EncodeItem(%+v): %v", it, err)
		}
		got, err := bridge.DecodeItem(b)
		if err != nil {
			t.Fatalf("DecodeItem(%s): %v", b, err)
		}
		if !equalItems(got, it) {
			t.Fatalf("round trip of %s: got %+v, want %+v", b, got, it)
		}
		again, err := bridge.EncodeItem(got)
		if err != nil || string(again) != string(b) {
			t.Fatalf("re-encoding gave %s, %v; want %s", again, err, b)
		}
	})
}

// FuzzDecodeItem: DecodeItem never panics, refuses only with ErrInvalid, and whatever it
// accepts re-encodes to an item equal to the one it decoded.
func FuzzDecodeItem(f *testing.F) {
	f.Add([]byte(wireForm))
	f.Add([]byte(strings.Replace(wireForm, `"last_run_at":0`, `"last_run_at":"2026-11-30T11:00:00.000000000Z"`, 1)))
	f.Add([]byte(strings.Replace(wireForm, `"v":1`, `"v":2`, 1)))
	f.Add([]byte(wireForm[:40]))
	f.Add([]byte(`{"v":1,"lane":"","token":"0","until":"0001-01-01T00:00:00.000000001Z","entry":{"user_id":"u","work_key":"k","tier":"","due_at":"9999-12-31T23:59:59.999999999Z","last_run_at":0,"miss_streak":0}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		item, err := bridge.DecodeItem(b)
		if err != nil {
			if !errors.Is(err, duework.ErrInvalid) {
				t.Fatalf("DecodeItem(%q) refused with %v, not ErrInvalid", b, err)
			}
			return
		}
		enc, err := bridge.EncodeItem(item)
		if err != nil {
			t.Fatalf("DecodeItem(%q) accepted %+v, which EncodeItem refuses: %v", b, item, err)
		}
		again, err := bridge.DecodeItem(enc)
		if err != nil || !equalItems(again, item) {
			t.Fatalf("DecodeItem(%q) = %+v; re-encoded as %s it decodes to %+v, %v", b, item, enc, again, err)
		}
	})
}

// TestWireErrorStreak: an entry's ErrorStreak travels as error_streak, left out when 0 so
// that such an item reads as before the field existed; an item without it decodes with
// ErrorStreak 0, and a bad one is refused.
func TestWireErrorStreak(t *testing.T) {
	failing := wireItem
	failing.Claim.Entry.ErrorStreak = 3
	b, err := bridge.EncodeItem(failing)
	if err != nil || !strings.Contains(string(b), `"miss_streak":3,"error_streak":3}`) {
		t.Fatalf("EncodeItem of a failing entry = %s, %v; want error_streak after miss_streak", b, err)
	}
	if got, err := bridge.DecodeItem(b); err != nil || !equalItems(got, failing) {
		t.Fatalf("DecodeItem(%s) = %+v, %v; want %+v", b, got, err, failing)
	}
	if strings.Contains(wireForm, "error_streak") {
		t.Fatalf("a zero ErrorStreak is written: %s", wireForm)
	}
	for _, bad := range []string{`"error_streak":-1`, `"error_streak":"1"`, `"error_streak":1.5`, `"Error_Streak":1`} {
		form := strings.Replace(wireForm, `"miss_streak":3`, `"miss_streak":3,`+bad, 1)
		if _, err := bridge.DecodeItem([]byte(form)); !errors.Is(err, duework.ErrInvalid) {
			t.Errorf("DecodeItem with %s = %v, want ErrInvalid", bad, err)
		}
	}
}
