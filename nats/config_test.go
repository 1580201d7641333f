package rotanats

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

// unescape inverts LaneToken for a token that was not shortened.
func unescape(t *testing.T, tok string) string {
	t.Helper()
	var b []byte
	for i := 0; i < len(tok); i++ {
		if tok[i] != '~' {
			b = append(b, tok[i])
			continue
		}
		if i+2 >= len(tok) {
			t.Fatalf("token %q ends inside an escape", tok)
		}
		var v byte
		for _, c := range tok[i+1 : i+3] {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | byte(c-'0')
			case c >= 'A' && c <= 'F':
				v = v<<4 | byte(c-'A'+10)
			default:
				t.Fatalf("token %q has a bad escape at %d", tok, i)
			}
		}
		b = append(b, v)
		i += 2
	}
	return string(b)
}

// checkToken checks what a subject token and a consumer name need of LaneToken(lane).
func checkToken(t *testing.T, lane string) string {
	t.Helper()
	tok := LaneToken(dispatch.Lane(lane))
	if tok == "" && lane != "" || len(tok) > maxToken {
		t.Fatalf("LaneToken(%q) = %q: empty or longer than %d", lane, tok, maxToken)
	}
	for _, c := range []byte(tok) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '~') {
			t.Fatalf("LaneToken(%q) = %q holds %q", lane, tok, c)
		}
	}
	if !strings.Contains(tok, "~h") && unescape(t, tok) != lane {
		t.Fatalf("LaneToken(%q) = %q reads back as %q", lane, tok, unescape(t, tok))
	}
	return tok
}

func TestLaneToken(t *testing.T) {
	for lane, want := range map[string]string{
		"pro":        "pro",
		"free tier":  "free~20tier",
		"a.b*c>":     "a~2Eb~2Ac~3E",
		"~":          "~7E",
		"ünïcode":    "~C3~BCn~C3~AFcode",
		"Plus_2-new": "Plus_2-new",
	} {
		if got := checkToken(t, lane); got != want {
			t.Errorf("LaneToken(%q) = %q, want %q", lane, got, want)
		}
	}
	long := strings.Repeat("é", 40)
	a, b := checkToken(t, long), checkToken(t, long+"x")
	if a == b || !strings.Contains(a, "~h") {
		t.Errorf("long lanes share or keep their token: %q, %q", a, b)
	}
}

// Distinct lanes have distinct tokens, and every token is a valid subject token and
// consumer name.
func FuzzLaneToken(f *testing.F) {
	f.Add("pro", "free")
	f.Add("a b", "a~20b")
	f.Add(strings.Repeat("x", 70), strings.Repeat("x", 71))
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := checkToken(t, a), checkToken(t, b)
		if a != b && ta == tb {
			t.Fatalf("LaneToken(%q) = LaneToken(%q) = %q", a, b, ta)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	good := Config{Lanes: []dispatch.Lane{"pro", "free"}, ClaimFor: time.Minute}
	if err := good.validate(); err != nil {
		t.Fatalf("a good Config: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no lanes", func(c *Config) { c.Lanes = nil }, "Config.Lanes"},
		{"a duplicate lane", func(c *Config) { c.Lanes = []dispatch.Lane{"a", "a"} }, "Config.Lanes[1]"},
		{"an empty lane", func(c *Config) { c.Lanes = []dispatch.Lane{""} }, "Config.Lanes[0]"},
		{"a bad lane", func(c *Config) { c.Lanes = []dispatch.Lane{" a"} }, "Config.Lanes[0]"},
		{"no ClaimFor", func(c *Config) { c.ClaimFor = 0 }, "Config.ClaimFor"},
		{"a margin as long as ClaimFor", func(c *Config) { c.ClaimMargin = time.Minute }, "Config.ClaimMargin"},
		{"a negative margin", func(c *Config) { c.ClaimMargin = -1 }, "Config.ClaimMargin"},
		{"a negative RunTime", func(c *Config) { c.RunTime = -1 }, "Config.RunTime"},
		{"a negative FetchWait", func(c *Config) { c.FetchWait = -1 }, "Config.FetchWait"},
		{"a negative MaxAckPending", func(c *Config) { c.MaxAckPending = -1 }, "Config.MaxAckPending"},
		{"a negative InHand", func(c *Config) { c.InHand = -1 }, "Config.InHand"},
		{"a stream with a dot", func(c *Config) { c.Stream = "a.b" }, "Config.Stream"},
		{"a wildcard subject", func(c *Config) { c.Subject = "rota.*" }, "Config.Subject"},
		{"an empty subject token", func(c *Config) { c.Subject = "rota..x" }, "Config.Subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field+" ") {
				t.Errorf("validate = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
		})
	}
}

// A lane's capacity is MaxAckPending × (ClaimFor − ClaimMargin) / RunTime, at least
// MaxAckPending, at most duework.MaxLimit.
func TestCapacity(t *testing.T) {
	c := Config{ClaimFor: time.Minute, ClaimMargin: 10 * time.Second}
	for _, tt := range []struct {
		runTime time.Duration
		maxAck  int
		want    int
	}{
		{0, 64, 64},
		{time.Hour, 64, 64},
		{10 * time.Second, 8, 40},
		{time.Millisecond, 1000, duework.MaxLimit},
	} {
		c.RunTime = tt.runTime
		if got := c.capacity(tt.maxAck); got != tt.want {
			t.Errorf("capacity with RunTime %v and MaxAckPending %d = %d, want %d", tt.runTime, tt.maxAck, got, tt.want)
		}
	}
}

// A message's ID names one claim of one entry.
func TestMsgID(t *testing.T) {
	it := dispatch.Item{Lane: "pro", Claim: duework.Claim{Token: 7, Until: time.Unix(100, 0),
		Entry: duework.Entry{UserID: "ana", WorkKey: "jobs"}}}
	same := it
	same.Claim.Until = time.Unix(200, 0)
	other, again := it, it
	other.Claim.Token = 8
	again.Claim.Entry.WorkKey = "news"
	if msgID(it) != msgID(same) || msgID(it) == msgID(other) || msgID(it) == msgID(again) {
		t.Errorf("msgID: %s %s %s %s", msgID(it), msgID(same), msgID(other), msgID(again))
	}
	// A user and a key that concatenate alike are still two entries.
	a := dispatch.Item{Claim: duework.Claim{Token: 1, Entry: duework.Entry{UserID: "ab", WorkKey: "c"}}}
	b := dispatch.Item{Claim: duework.Claim{Token: 1, Entry: duework.Entry{UserID: "a", WorkKey: "bc"}}}
	if msgID(a) == msgID(b) {
		t.Errorf("msgID(ab/c) = msgID(a/bc) = %s", msgID(a))
	}
}
