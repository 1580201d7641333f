package rotasqs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// unescape reads a lane back from the part of its queue name after the prefix, for a
// name that was not cut.
func unescape(t *testing.T, tok string) string {
	t.Helper()
	var b []byte
	for i := 0; i < len(tok); i++ {
		if tok[i] != '_' {
			b = append(b, tok[i])
			continue
		}
		if i+2 >= len(tok) || !isUpperHex(tok[i+1]) || !isUpperHex(tok[i+2]) {
			t.Fatalf("%q has a bad escape at %d", tok, i)
		}
		hi, lo := tok[i+1], tok[i+2]
		val := func(c byte) byte {
			if c <= '9' {
				return c - '0'
			}
			return c - 'A' + 10
		}
		b = append(b, val(hi)<<4|val(lo))
		i += 2
	}
	return string(b)
}

// checkName checks what SQS needs of Config{Prefix: prefix}.QueueName(lane), that it
// reads as a lane's queue, and that it reads back as lane when it was not cut.
func checkName(t *testing.T, prefix, lane string) string {
	t.Helper()
	name := Config{Prefix: prefix}.QueueName(dispatch.Lane(lane))
	if len(name) > maxQueueName || name == prefix || !strings.HasPrefix(name, prefix) {
		t.Fatalf("QueueName(%q, %q) = %q: longer than %d or without the lane", prefix, lane, name, maxQueueName)
	}
	for _, c := range []byte(name) {
		if !tokenByte(rune(c)) && c != '_' {
			t.Fatalf("QueueName(%q, %q) = %q holds %q", prefix, lane, name, c)
		}
	}
	if !isLaneQueue(prefix, name) {
		t.Fatalf("QueueName(%q, %q) = %q does not read as a lane's queue", prefix, lane, name)
	}
	if rest := name[len(prefix):]; !strings.Contains(rest, "_h") && unescape(t, rest) != lane {
		t.Fatalf("QueueName(%q, %q) = %q reads back as %q", prefix, lane, name, unescape(t, rest))
	}
	return name
}

func TestQueueName(t *testing.T) {
	for lane, want := range map[string]string{
		"pro":        "rota-pro",
		"free tier":  "rota-free_20tier",
		"a.b*c>":     "rota-a_2Eb_2Ac_3E",
		"_":          "rota-_5F",
		"ünïcode":    "rota-_C3_BCn_C3_AFcode",
		"Plus_2-new": "rota-Plus_5F2-new",
	} {
		if got := checkName(t, DefaultPrefix, lane); got != want {
			t.Errorf("QueueName(%q) = %q, want %q", lane, got, want)
		}
	}
	long := strings.Repeat("é", 40)
	a, b := checkName(t, "p-", long), checkName(t, "p-", long+"x")
	if a == b || len(a) < maxQueueName-2 || !strings.Contains(a, "_h") {
		t.Errorf("long lanes share or keep their name: %q, %q", a, b)
	}
	for _, name := range []string{"rota-", "rota-a.fifo", "rota-_zz", "rota-_4", "other-pro", "rota-a b"} {
		if isLaneQueue(DefaultPrefix, name) {
			t.Errorf("%q reads as a lane's queue", name)
		}
	}
}

// Distinct lanes have distinct queues, every name is one SQS takes and reads as a lane's.
func FuzzQueueName(f *testing.F) {
	for _, s := range []string{"pro", "free tier", "_", "_5F", "ü", strings.Repeat("x", 79)} {
		f.Add("rota-", s, s+"_")
	}
	f.Fuzz(func(t *testing.T, prefix, a, b string) {
		if (Config{Prefix: prefix}).validate() != nil || a == "" || b == "" {
			return
		}
		if prefix == "" {
			prefix = DefaultPrefix
		}
		na, nb := checkName(t, prefix, a), checkName(t, prefix, b)
		if a != b && na == nb {
			t.Fatalf("lanes %q and %q share queue %q", a, b, na)
		}
	})
}

func TestGroupID(t *testing.T) {
	for id, want := range map[string]string{"ana": "ana", "Ana.B-2@x": "Ana.B-2@x", strings.Repeat("a", 128): strings.Repeat("a", 128)} {
		if got := GroupID(id); got != want {
			t.Errorf("GroupID(%q) = %q, want %q", id, got, want)
		}
	}
	for _, id := range []string{"ünï", "a b", strings.Repeat("a", 129)} {
		got := GroupID(id)
		if !strings.HasPrefix(got, "rota-h-") || len(got) != 39 || got == GroupID(id+"x") {
			t.Errorf("GroupID(%q) = %q: not a hash of its own", id, got)
		}
	}
}

func TestConfigRefuses(t *testing.T) {
	dc := dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: "pro"}}, ClaimFor: time.Minute}
	w, err := bridge.NewWorker(&bridge.Bridge{Index: duework.NewMemory(), Watchlist: tenancy.NewMemoryWatchlist(),
		Pipeline: bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
			return bridge.Result{}, nil
		})}, bridge.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := sqs.New(sqs.Options{Region: "us-east-1"})
	for _, tc := range []struct {
		name, field string
		client      Client
		dc          dispatch.Config
		cfg         Config
	}{
		{"nil client", "client must not be nil", nil, dc, Config{}},
		{"no lanes", "dispatch.Config.Lanes must hold at least one lane", c, dispatch.Config{ClaimFor: time.Minute}, Config{}},
		{"duplicate lanes", "dispatch.Config.Lanes[1].Lane must differ from Lanes[0].Lane",
			c, dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: "pro"}, {Lane: "pro"}}, ClaimFor: time.Minute}, Config{}},
		{"empty lane", "dispatch.Config.Lanes[0].Lane must be a valid lane name",
			c, dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: ""}}, ClaimFor: time.Minute}, Config{}},
		{"no claim", "dispatch.Config.ClaimFor must be positive", c, dispatch.Config{Lanes: dc.Lanes}, Config{}},
		{"negative skew", "dispatch.Config.MaxClockSkew", c, dispatch.Config{Lanes: dc.Lanes, ClaimFor: time.Minute, MaxClockSkew: -1}, Config{}},
		{"bad prefix", "Config.Prefix", c, dc, Config{Prefix: "rota."}},
		{"long prefix", "Config.Prefix", c, dc, Config{Prefix: strings.Repeat("p", MaxPrefix+1)}},
		{"negative in flight", "Config.InFlight", c, dc, Config{InFlight: -1}},
		{"negative in hand", "Config.InHand", c, dc, Config{InHand: -1}},
		{"negative run time", "Config.RunTime", c, dc, Config{RunTime: -time.Second}},
		{"long wait", "Config.WaitTime", c, dc, Config{WaitTime: 21 * time.Second}},
		{"fractional wait", "Config.WaitTime", c, dc, Config{WaitTime: 1500 * time.Millisecond}},
		{"negative scan", "Config.ScanEvery", c, dc, Config{ScanEvery: -time.Second}},
	} {
		if s, err := NewSink(tc.client, tc.dc, tc.cfg); s != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewSink = %v; want ErrInvalidConfig naming %q", tc.name, err, tc.field)
		}
		if cs, err := NewConsumer(tc.client, w, tc.dc, tc.cfg); cs != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewConsumer = %v; want ErrInvalidConfig naming %q", tc.name, err, tc.field)
		}
	}
	if _, err := NewConsumer(c, nil, dc, Config{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "w must not be nil") {
		t.Errorf("NewConsumer with a nil Worker = %v", err)
	}
}

// A receive's visibility outlasts every claim; a message's follows its claim; both in
// whole seconds, within SQS's bound.
func TestVisibility(t *testing.T) {
	s, err := settle(dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: "pro"}}, ClaimFor: time.Minute, MaxClockSkew: 200 * time.Millisecond}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		left time.Duration
		want int32
	}{{time.Minute, 62}, {10 * time.Second, 12}, {0, 2}, {-time.Hour, 2}, {24 * time.Hour, 43200}} {
		if got := s.visibility(c.left); got != c.want {
			t.Errorf("visibility(%v) = %d, want %d", c.left, got, c.want)
		}
	}
	if got := s.receiveVisibility(); got != 62 {
		t.Errorf("receiveVisibility = %d, want 62", got)
	}
}
