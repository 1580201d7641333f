package rotanats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
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
	if err := (Config{}).validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"a negative RunTime", Config{RunTime: -1}, "Config.RunTime"},
		{"a negative FetchWait", Config{FetchWait: -1}, "Config.FetchWait"},
		{"a negative ShutdownTimeout", Config{ShutdownTimeout: -1}, "Config.ShutdownTimeout"},
		{"a negative MaxAckPending", Config{MaxAckPending: -1}, "Config.MaxAckPending"},
		{"a negative InHand", Config{InHand: -1}, "Config.InHand"},
		{"a stream with a dot", Config{Stream: "a.b"}, "Config.Stream"},
		{"a wildcard subject", Config{Subject: "rota.*"}, "Config.Subject"},
		{"an empty subject token", Config{Subject: "rota..x"}, "Config.Subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field+" ") {
				t.Errorf("validate = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
		})
	}
}

// A Consumer refuses a dispatch.Config whose lanes or ClaimFor dispatch.New would refuse.
func TestCheckDispatch(t *testing.T) {
	lanes := func(names ...dispatch.Lane) []dispatch.LaneCapacity {
		var lcs []dispatch.LaneCapacity
		for _, n := range names {
			lcs = append(lcs, dispatch.LaneCapacity{Lane: n})
		}
		return lcs
	}
	if err := checkDispatch(dispatch.Config{Lanes: lanes("pro", "free"), ClaimFor: time.Minute}); err != nil {
		t.Fatalf("a good dispatch.Config: %v", err)
	}
	for _, tt := range []struct {
		name  string
		dc    dispatch.Config
		field string
	}{
		{"no lanes", dispatch.Config{ClaimFor: time.Minute}, "dispatch.Config.Lanes"},
		{"a duplicate lane", dispatch.Config{Lanes: lanes("a", "a"), ClaimFor: time.Minute}, "dispatch.Config.Lanes[1].Lane"},
		{"an empty lane", dispatch.Config{Lanes: lanes(""), ClaimFor: time.Minute}, "dispatch.Config.Lanes[0].Lane"},
		{"a bad lane", dispatch.Config{Lanes: lanes(" a"), ClaimFor: time.Minute}, "dispatch.Config.Lanes[0].Lane"},
		{"no ClaimFor", dispatch.Config{Lanes: lanes("a")}, "dispatch.Config.ClaimFor"},
		{"a ClaimFor too short", dispatch.Config{Lanes: lanes("a"), ClaimFor: time.Millisecond}, "dispatch.Config.ClaimFor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDispatch(tt.dc)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field+" ") {
				t.Errorf("checkDispatch = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
		})
	}
}

// testQueue is the queue of cfg for lanes and claimFor.
func testQueue(cfg Config, claimFor time.Duration, lanes ...dispatch.Lane) queue {
	dc := dispatch.Config{ClaimFor: claimFor}
	for _, l := range lanes {
		dc.Lanes = append(dc.Lanes, dispatch.LaneCapacity{Lane: l})
	}
	return newQueue(cfg, dc)
}

// The staleness margin is a Runner's with the default ClaimMargin: min(5 s, ClaimFor/4).
// A lane's capacity is MaxAckPending × (ClaimFor − margin) / RunTime, at least
// MaxAckPending, at most duework.MaxLimit.
func TestMarginAndCapacity(t *testing.T) {
	for claimFor, want := range map[time.Duration]time.Duration{time.Minute: bridge.DefaultClaimMargin, 8 * time.Second: 2 * time.Second} {
		if got := testQueue(Config{}, claimFor).margin(); got != want {
			t.Errorf("margin for ClaimFor %v = %v, want %v", claimFor, got, want)
		}
	}
	for _, tt := range []struct {
		runTime time.Duration
		maxAck  int
		want    int
	}{
		{0, 64, 64},
		{time.Hour, 64, 64},
		{11 * time.Second, 8, 40}, // (60 s − 5 s) / 11 s = 5 rounds
		{time.Millisecond, 1000, duework.MaxLimit},
	} {
		q := testQueue(Config{RunTime: tt.runTime}, time.Minute)
		if got := q.capacity(tt.maxAck); got != tt.want {
			t.Errorf("capacity with RunTime %v and MaxAckPending %d = %d, want %d", tt.runTime, tt.maxAck, got, tt.want)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tt := range []struct {
		pattern, subject string
		want             bool
	}{
		{"rota.*", "rota.pro", true},
		{"rota.*", "rota", false},
		{"rota.*", "rota.pro.x", false},
		{"rota.>", "rota.pro.x", true},
		{"rota.>", "rota", false},
		{"rota.pro", "rota.pro", true},
		{"rota.pro", "rota.free", false},
		{"*.pro", "work.pro", true},
		{">", "rota.pro", true},
		{"other.*", "rota.pro", false},
	} {
		if got := subjectMatches(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
		}
	}
}

// An existing stream that disagrees with a worker's ClaimFor or lanes is named, with both
// values.
func TestCheckStream(t *testing.T) {
	q := testQueue(Config{Stream: "S", Subject: "rota"}, 30*time.Second, "pro", "free tier")
	if err := q.checkStream(q.streamConfig()); err != nil {
		t.Fatalf("the stream as declared: %v", err)
	}
	if err := q.checkStream(jetstream.StreamConfig{Subjects: []string{"rota.pro", "rota.free~20tier", "x.>"}, Duplicates: 30 * time.Second}); err != nil {
		t.Errorf("a stream with a subject per lane: %v", err)
	}
	other := q.streamConfig()
	other.Duplicates = time.Minute
	err := q.checkStream(other)
	if !errors.Is(err, ErrStreamMismatch) || !strings.Contains(err.Error(), "1m0s") || !strings.Contains(err.Error(), "30s") {
		t.Errorf("a duplicate window of 1m: %v, want ErrStreamMismatch naming 1m0s and 30s", err)
	}
	other = q.streamConfig()
	other.Subjects = []string{"rota.pro"}
	err = q.checkStream(other)
	if !errors.Is(err, ErrStreamMismatch) || !strings.Contains(err.Error(), `"rota.free~20tier"`) || !strings.Contains(err.Error(), `["rota.pro"]`) {
		t.Errorf("a stream without lane free tier: %v, want ErrStreamMismatch naming its subjects and the lane's", err)
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

// A create of the stream that another process's create overtook is answered with the
// name taken or, while that create is under way, the subjects: either way the caller looks
// the stream up by name. Any other answer is an error.
func TestCreatedMeanwhile(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{jetstream.ErrStreamNameAlreadyInUse, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10065, Description: "subjects overlap with an existing stream"}, true},
		{fmt.Errorf("create: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}), true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, false},
		{jetstream.ErrStreamNotFound, false},
		{errors.New("connection closed"), false},
		{nil, false},
	} {
		if got := createdMeanwhile(c.err); got != c.want {
			t.Errorf("createdMeanwhile(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
