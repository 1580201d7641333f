package vocab_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rotaworks/rota/internal/vocab"
)

var errBad = errors.New("pkg: bad input")

// modelValid is the name rule written independently of the package: 1 to 256 bytes of
// valid UTF-8, no rune of Unicode category Cc or Cf, and no white space first or last.
func modelValid(s string) bool {
	if len(s) == 0 || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	rs := []rune(s)
	for _, r := range rs {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return false
		}
	}
	return !unicode.IsSpace(rs[0]) && !unicode.IsSpace(rs[len(rs)-1])
}

// names are the cases every family must agree on, valid and not.
var names = []struct {
	s    string
	ok   bool
	says string // what the error says, after the field
}{
	{"amy", true, ""},
	{"acme corp", true, ""},
	{"José", true, ""},
	{"日本語", true, ""},
	{"a.b-c_d:e/f", true, ""},
	{strings.Repeat("x", 256), true, ""},
	{strings.Repeat("é", 128), true, ""},
	{"", false, "is empty"},
	{strings.Repeat("x", 257), false, "is 257 bytes, longer than 256"},
	{strings.Repeat("é", 128) + "x", false, "longer than 256"},
	{"a\xffb", false, "is not valid UTF-8"},
	{"\xed\xa0\x80", false, "is not valid UTF-8"}, // a surrogate
	{"a\x00b", false, "contains control character U+0000"},
	{"a\nb", false, "contains control character U+000A"},
	{"a\x7fb", false, "contains control character U+007F"},
	{"a\u0085b", false, "contains control character U+0085"},
	{"hot\x1b[2J", false, "contains control character U+001B"},
	{"a\u200bb", false, "contains format character U+200B"},
	{"a\u202eb", false, "contains format character U+202E"},
	{"\ufeffa", false, "contains format character U+FEFF"},
	{"a\u200db", false, "contains format character U+200D"},
	{" amy", false, "begins with white space U+0020"},
	{"amy ", false, "ends with white space U+0020"},
	{"\u00a0amy", false, "begins with white space U+00A0"},
	{"amy\u3000", false, "ends with white space U+3000"},
	{" ", false, "begins with white space U+0020"},
}

func TestName(t *testing.T) {
	for _, c := range names {
		err := vocab.Name(errBad, "field", c.s)
		if got := err == nil; got != c.ok || vocab.ValidName(c.s) != c.ok || modelValid(c.s) != c.ok {
			t.Errorf("Name(%q) = %v, ValidName %v, model %v; want valid %v", c.s, err, vocab.ValidName(c.s), modelValid(c.s), c.ok)
			continue
		}
		if c.ok {
			continue
		}
		if !errors.Is(err, errBad) || !strings.HasPrefix(err.Error(), "pkg: bad input: field") || !strings.HasSuffix(err.Error(), c.says) {
			t.Errorf("Name(%q) = %q, want the sentinel, then the field, ending %q", c.s, err, c.says)
		}
	}
}

func TestTime(t *testing.T) {
	ok := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 59, 0, 0, time.FixedZone("+01", 3600)), // 9999-12-31T23:59Z
	}
	bad := []time.Time{
		time.Time{}.Add(-time.Nanosecond),
		time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("+01", 3600)), // year 0 in UTC
		time.Date(292277026596, 12, 4, 15, 30, 7, 0, time.UTC),
	}
	if !vocab.MinTime.IsZero() || !vocab.MaxTime.Equal(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)) {
		t.Fatalf("MinTime %v, MaxTime %v: want the zero time and the last nanosecond of 9999", vocab.MinTime, vocab.MaxTime)
	}
	for _, at := range ok {
		if err := vocab.Time(errBad, "now", at); err != nil || !vocab.ValidTime(at) {
			t.Errorf("Time(%v) = %v, ValidTime %v; want accepted", at, err, vocab.ValidTime(at))
		}
	}
	for _, at := range bad {
		err := vocab.Time(errBad, "now", at)
		if !errors.Is(err, errBad) || !strings.Contains(err.Error(), "now") || vocab.ValidTime(at) {
			t.Errorf("Time(%v) = %v, ValidTime %v; want the sentinel naming now", at, err, vocab.ValidTime(at))
		}
	}
}

func TestClaimWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now, until time.Time
		field      string // "" for accepted
	}{
		{t0, t0.Add(time.Nanosecond), ""},
		{time.Time{}, vocab.MaxTime, ""},
		{t0, t0, "until"},
		{t0, t0.Add(-time.Second), "until"},
		{time.Time{}.Add(-1), t0, "now"},
		{t0, vocab.MaxTime.Add(1), "until"},
	} {
		err := vocab.ClaimWindow(errBad, c.now, c.until)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("ClaimWindow(%v, %v) = %v, want nil", c.now, c.until, err)
		case c.field != "" && (!errors.Is(err, errBad) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("ClaimWindow(%v, %v) = %v, want the sentinel naming %s", c.now, c.until, err, c.field)
		}
	}
}

func TestRanges(t *testing.T) {
	if vocab.MaxLimit != 1<<20 || vocab.MaxWeight != 1000 || vocab.MaxNameLength != 256 {
		t.Fatalf("MaxLimit %d, MaxWeight %d, MaxNameLength %d", vocab.MaxLimit, vocab.MaxWeight, vocab.MaxNameLength)
	}
	for n, ok := range map[int]bool{-1: false, 0: false, 1: true, vocab.MaxLimit: true, vocab.MaxLimit + 1: false} {
		err := vocab.Limit(errBad, "limit", n)
		if (err == nil) != ok || (err != nil && (!errors.Is(err, errBad) || !strings.Contains(err.Error(), "limit must be in [1, 1048576]"))) {
			t.Errorf("Limit(%d) = %v, want valid %v", n, err, ok)
		}
	}
	if err := vocab.Range(errBad, "Weight", 1001, 0, 1000); err == nil || err.Error() != "pkg: bad input: Weight must be in [0, 1000], got 1001" {
		t.Errorf("Range(1001) = %v", err)
	}
}

func TestEach(t *testing.T) {
	check := func(s string) error { return vocab.Name(errBad, "key", s) }
	if err := vocab.Each("keys", []string{"a", "b"}, check); err != nil {
		t.Errorf("Each of valid keys = %v", err)
	}
	err := vocab.Each("keys", []string{"a", "", "\x00"}, check)
	if !errors.Is(err, errBad) || err.Error() != "keys[1]: pkg: bad input: key is empty" {
		t.Errorf("Each = %v, want the first bad element's error under its index", err)
	}
}

func TestNameAllocatesNothingWhenValid(t *testing.T) {
	s := strings.Repeat("é", 100) + " x"
	if n := testing.AllocsPerRun(100, func() {
		if vocab.Name(errBad, "f", s) != nil || vocab.Problem("f", s) != "" {
			t.Fatal("refused a valid name")
		}
	}); n != 0 {
		t.Errorf("a valid name costs %v allocations, want 0", n)
	}
}

// FuzzName checks the rule against the model, and that Name, ValidName and Problem agree
// and an error always carries the sentinel and the field.
func FuzzName(f *testing.F) {
	for _, c := range names {
		f.Add(c.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := modelValid(s)
		err := vocab.Name(errBad, "field", s)
		p := vocab.Problem("field", s)
		if vocab.ValidName(s) != want || (err == nil) != want || (p == "") != want {
			t.Fatalf("%q: ValidName %v, Name %v, Problem %q; the model says valid %v", s, vocab.ValidName(s), err, p, want)
		}
		if err != nil && (!errors.Is(err, errBad) || err.Error() != "pkg: bad input: "+p || !strings.HasPrefix(p, "field ")) {
			t.Fatalf("%q: Name = %q, want the sentinel, then Problem %q naming the field", s, err, p)
		}
	})
}

// FuzzTime checks the time range against the calendar: a time is valid exactly when its
// UTC year is 1 to 9999.
func FuzzTime(f *testing.F) {
	f.Add(int64(-62135596800), int64(0))  // the zero time
	f.Add(int64(-62135596800), int64(-1)) // its last nanosecond before
	f.Add(int64(253402300799), int64(999999999))
	f.Add(int64(253402300800), int64(0))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		at := time.Unix(sec, nsec)
		y := at.UTC().Year()
		want := y >= 1 && y <= 9999
		if vocab.ValidTime(at) != want || (vocab.Time(errBad, "t", at) == nil) != want {
			t.Fatalf("%v (UTC year %d): ValidTime %v, want %v", at, y, vocab.ValidTime(at), want)
		}
	})
}
