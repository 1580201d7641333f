package rotanats

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrInvalidConfig is returned by NewSink and NewConsumer when a Config cannot work; the
// wrapping error names the field and its value, every problem joined.
var ErrInvalidConfig = errors.New("rotanats: invalid config")

// ErrUnknownLane is returned by Sink.Send for a lane the Config does not list.
var ErrUnknownLane = errors.New("rotanats: unknown lane")

// The defaults of a zero Config field.
const (
	// DefaultStream is the stream of a zero Config.Stream.
	DefaultStream = "ROTA"
	// DefaultSubject is the subject prefix of a zero Config.Subject.
	DefaultSubject = "rota"
	// DefaultMaxAckPending is the MaxAckPending of a zero Config.MaxAckPending.
	DefaultMaxAckPending = 64
	// DefaultInHand is the InHand of a zero Config.InHand.
	DefaultInHand = 8
	// DefaultFetchWait is the FetchWait of a zero Config.FetchWait.
	DefaultFetchWait = time.Second
	// AckSlack is how much longer than ClaimFor a lane consumer's AckWait is: a message
	// is redelivered only once the claim it carries has ended, on any clock within this
	// of the dispatcher's.
	AckSlack = time.Second
	// MaxSendBatch is the most publishes Send has awaiting the server's acknowledgement
	// at once.
	MaxSendBatch = 256
)

// maxToken is the longest lane token: a consumer name holds at most 255 bytes, and a
// subject stays short enough to read.
const maxToken = 64

// Config describes the queue between the dispatcher and its workers: one JetStream
// stream, a subject per lane, a durable pull consumer per lane that every worker process
// shares. Hand the same Config to NewSink in the dispatcher's process and to NewConsumer
// in each worker process. Lanes and ClaimFor are required; a zero field means its
// default.
type Config struct {
	// Stream names the stream; zero means DefaultStream. The stream is created when
	// missing, with work-queue retention: a message leaves the stream once acknowledged.
	Stream string
	// Subject is the subjects' prefix: lane L's items go to Subject + "." + the token of
	// L (see LaneToken). Zero means DefaultSubject. The stream takes Subject + ".*".
	Subject string
	// Lanes lists every lane of the Dispatcher. A lane's consumer is named by its token.
	Lanes []dispatch.Lane
	// ClaimFor is the Dispatcher's ClaimFor (dispatch.Config.ClaimFor). A lane
	// consumer's AckWait is ClaimFor + AckSlack, and the stream's duplicate window is
	// ClaimFor: a publish retried while its claim lasts is stored once.
	ClaimFor time.Duration
	// ClaimMargin is the workers' claim margin (bridge.WorkerConfig.ClaimMargin); zero
	// means bridge.DefaultClaimMargin. The Sink counts a lane as stale while its oldest
	// message's claim ends within it.
	ClaimMargin time.Duration
	// RunTime is how long one item typically holds a worker's slot, from its delivery to
	// its acknowledgement. The Sink lets each lane queue what the lane's in-flight slots
	// can start before the claims end: MaxAckPending × (ClaimFor − ClaimMargin) / RunTime
	// items. Zero means one item per slot: the queue holds at most MaxAckPending.
	RunTime time.Duration
	// MaxAckPending is, for each lane, the most messages delivered and not yet
	// acknowledged across every worker process: the fleet's in-flight bound, set on the
	// lane's consumer by NewConsumer's Run. The Sink reads it back from the consumer, so
	// the dispatcher follows what the workers declared. Zero means DefaultMaxAckPending.
	MaxAckPending int
	// InHand is how many messages of each lane one worker process holds at once:
	// fetched, waiting for a slot, running or being written; it is also the most one pull
	// asks for, and the items of one pull share the Worker's claim check. A few times the
	// Worker's slots keeps them busy between pulls; more lets one process take what
	// another could start sooner. Zero means DefaultInHand.
	InHand int
	// FetchWait is the longest one pull waits for messages: how soon a Consumer notices
	// that its context ended. Zero means DefaultFetchWait.
	FetchWait time.Duration
	// Clock is where the Sink reads the time that decides staleness and where the
	// Consumer reads each item's start; nil means the real clock.
	Clock Clock
	// Logger receives one line per failed call and per message that does not decode; nil
	// means slog.Default() at the time NewSink or NewConsumer is called.
	Logger *slog.Logger
}

// withDefaults returns c with every zero knob set to its default.
func (c Config) withDefaults() Config {
	or(&c.Stream, DefaultStream)
	or(&c.Subject, DefaultSubject)
	or(&c.ClaimMargin, bridge.DefaultClaimMargin)
	or(&c.MaxAckPending, DefaultMaxAckPending)
	or(&c.InHand, DefaultInHand)
	or(&c.FetchWait, DefaultFetchWait)
	or[Clock](&c.Clock, realClock{})
	or(&c.Logger, slog.Default())
	return c
}

func or[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// validate reports every rule c breaks, joined.
func (c Config) validate() error {
	var errs []error
	bad := func(field, must string, got any) {
		errs = append(errs, fmt.Errorf("%w: Config.%s must %s, got %v", ErrInvalidConfig, field, must, got))
	}
	d := c.withDefaults()
	if err := checkStreamName(d.Stream); err != nil {
		bad("Stream", "be a stream name ("+err.Error()+")", fmt.Sprintf("%q", c.Stream))
	}
	if err := checkSubject(d.Subject); err != nil {
		bad("Subject", "be a subject without wildcards ("+err.Error()+")", fmt.Sprintf("%q", c.Subject))
	}
	if len(c.Lanes) == 0 {
		bad("Lanes", "hold at least one lane", "none")
	}
	seen := map[dispatch.Lane]int{}
	for i, l := range c.Lanes {
		if j, dup := seen[l]; dup {
			bad(fmt.Sprintf("Lanes[%d]", i), fmt.Sprintf("differ from Lanes[%d]", j), fmt.Sprintf("%q", l))
		} else if tenancy.ValidateID("lane", string(l)) != nil {
			bad(fmt.Sprintf("Lanes[%d]", i), "be a valid lane name", fmt.Sprintf("%q", l))
		}
		seen[l] = i
	}
	if c.ClaimFor <= 0 {
		bad("ClaimFor", "be positive", c.ClaimFor)
	}
	for _, k := range []struct {
		name string
		v    time.Duration
	}{{"ClaimMargin", c.ClaimMargin}, {"RunTime", c.RunTime}, {"FetchWait", c.FetchWait}} {
		if k.v < 0 {
			bad(k.name, "not be negative", k.v)
		}
	}
	if c.ClaimFor > 0 && d.ClaimMargin >= c.ClaimFor {
		bad("ClaimMargin", fmt.Sprintf("be less than ClaimFor %v", c.ClaimFor), d.ClaimMargin)
	}
	if c.MaxAckPending < 0 {
		bad("MaxAckPending", "not be negative", c.MaxAckPending)
	}
	if c.InHand < 0 {
		bad("InHand", "not be negative", c.InHand)
	}
	return errors.Join(errs...)
}

// capacity is how many items one lane may hold unacknowledged, for a consumer whose
// MaxAckPending is maxAck.
func (c Config) capacity(maxAck int) int {
	rounds := 1
	if c.RunTime > 0 {
		rounds = max(1, int((c.ClaimFor-c.ClaimMargin)/c.RunTime))
	}
	return min(maxAck*rounds, duework.MaxLimit)
}

// subject is the subject of lane's items.
func (c Config) subject(lane dispatch.Lane) string { return c.Subject + "." + LaneToken(lane) }

// streamConfig is the stream both sides declare.
func (c Config) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       c.Stream,
		Subjects:   []string{c.Subject + ".*"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: c.ClaimFor,
	}
}

// consumerConfig is the consumer of lane that the workers declare.
func (c Config) consumerConfig(lane dispatch.Lane) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       LaneToken(lane),
		Description:   "rota lane " + string(lane),
		FilterSubject: c.subject(lane),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.ClaimFor + AckSlack,
		MaxDeliver:    -1,
		MaxAckPending: c.MaxAckPending,
	}
}

// LaneToken is lane as one subject token and consumer name: ASCII letters, digits, '-'
// and '_' stay as they are, every other byte becomes '~' and two upper-case hex digits.
// A token longer than 64 bytes is cut to 40 and followed by "~h" and 16 hex digits of the
// lane's SHA-256, so distinct lanes always have distinct tokens.
func LaneToken(lane dispatch.Lane) string {
	var b strings.Builder
	for i := 0; i < len(lane); i++ {
		ch := lane[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "~%02X", ch)
	}
	tok := b.String()
	if len(tok) <= maxToken {
		return tok
	}
	sum := sha256.Sum256([]byte(lane))
	return tok[:40] + "~h" + hex.EncodeToString(sum[:8])
}

// msgID is the Nats-Msg-Id of item: one claim of one entry, so a retried publish of it
// is stored once and another claim of the entry is a new message.
func msgID(item dispatch.Item) string {
	e := item.Claim.Entry
	sum := sha256.Sum256([]byte(e.UserID + "\x00" + e.WorkKey))
	return fmt.Sprintf("rota-%s-%d", hex.EncodeToString(sum[:12]), item.Claim.Token)
}

// checkStreamName reports why name cannot name a stream.
func checkStreamName(name string) error {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, " \t\r\n.*>/\\") {
		return errors.New("1 to 255 bytes, none of . * > / \\ or white space")
	}
	return nil
}

// checkSubject reports why s cannot prefix the lane subjects.
func checkSubject(s string) error {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return errors.New("dot-separated tokens, none empty, a wildcard or holding white space")
		}
	}
	return nil
}

// Clock is where a Sink and a Consumer read the time; a bridge.Clock is one.
type Clock interface {
	// Now is time.Now.
	Now() time.Time
}

// realClock is the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
