package rotasqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrInvalidConfig is returned by NewSink and NewConsumer when a Config or the
// dispatch.Config they are given cannot work; the wrapping error names the field and its
// value, every problem joined.
var ErrInvalidConfig = errors.New("rotasqs: invalid config")

// ErrUnknownLane is returned by Sink.Send for a lane the dispatch.Config does not list.
var ErrUnknownLane = errors.New("rotasqs: unknown lane")

// The defaults of a zero Config field, and the bounds SQS sets.
const (
	// DefaultPrefix is the queue-name prefix of a zero Config.Prefix.
	DefaultPrefix = "rota-"
	// DefaultInFlight is the InFlight of a zero Config.InFlight.
	DefaultInFlight = 64
	// DefaultInHand is the InHand of a zero Config.InHand.
	DefaultInHand = 10
	// DefaultWaitTime is the WaitTime of a zero Config.WaitTime.
	DefaultWaitTime = 5 * time.Second
	// DefaultScanEvery is the ScanEvery of a zero Config.ScanEvery.
	DefaultScanEvery = time.Minute
	// VisibilitySlack is how much longer than its claim, with the dispatcher's
	// MaxClockSkew, a message stays invisible once received: it is delivered again only
	// once the claim it carries has ended, on any clock of the fleet.
	VisibilitySlack = time.Second
	// MaxBatch is the most messages SQS takes in one send, receive, delete or visibility
	// change.
	MaxBatch = 10
	// MaxVisibility is the longest visibility timeout SQS allows.
	MaxVisibility = 12 * time.Hour
	// MaxPrefix is the longest Config.Prefix: a queue name holds at most 80 characters,
	// and a lane's part needs the rest.
	MaxPrefix = 40
)

// Config holds the knobs of a Sink and a Consumer; the zero value means the defaults. The
// lanes and the claims' length are not here: NewSink and NewConsumer read them from the
// Dispatcher's dispatch.Config, so the queues cannot disagree with what is dispatched.
// Hand the same Config to both.
type Config struct {
	// Prefix begins the name of every lane's queue: lane L's queue is named
	// Config.QueueName(L). Zero means DefaultPrefix. At most MaxPrefix ASCII letters,
	// digits, '-' and '_'. Every queue whose name starts with Prefix and then reads as a
	// lane's is rota's: a Consumer drains such a queue even when its lane is not one of
	// the Dispatcher's (a lane removed, a dispatcher of an older configuration still
	// sending), so its messages do not wait there for ever.
	Prefix string
	// InFlight is, for each lane, how many items the whole fleet of workers runs at once:
	// the sum of the Workers' slots that consume it, or for Lambda the event source
	// mapping's maximum concurrency times its batch size. The Sink lets each lane hold
	// what those slots can start before the claims end: InFlight × (ClaimFor − margin) /
	// RunTime items, margin being min(bridge.DefaultClaimMargin, ClaimFor/4), or InFlight
	// alone when RunTime is zero. Zero means DefaultInFlight.
	InFlight int
	// RunTime is how long one item typically holds a worker's slot, from its receipt to
	// its deletion (see InFlight). Zero means one item per slot.
	RunTime time.Duration
	// InHand is how many messages of each lane one Consumer holds at once: received,
	// waiting for a slot of its Worker, running or being deleted. A receive asks for at
	// most MaxBatch, and the items of one receive share the Worker's claim check. A few
	// times the Worker's slots, split over the lanes, keeps them busy between receives;
	// more lets one process take what another could start sooner. Zero means
	// DefaultInHand.
	InHand int
	// WaitTime is the longest one receive waits for messages (a long poll): how soon a
	// Consumer notices that its context ended, and how many empty receives an idle lane
	// costs. Whole seconds from 1 to 20; zero means DefaultWaitTime.
	WaitTime time.Duration
	// ScanEvery is how often a Consumer lists the queues under Prefix to find those that
	// are no lane's (see Prefix). Zero means DefaultScanEvery.
	ScanEvery time.Duration
	// Clock is where a Consumer reads the time an item starts and a message's claim is
	// judged; nil means the real clock.
	Clock Clock
	// Logger receives a Consumer's lines about failed calls and messages dropped unrun,
	// at most one every ten seconds per queue and kind, and a Sink's about items it could
	// not send; nil means slog.Default() at the time NewSink or NewConsumer is called.
	Logger *slog.Logger
}

// Client is the part of the SQS API that a Sink and a Consumer call; *sqs.Client is one.
type Client interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ Client = (*sqs.Client)(nil)

// Clock is where a Consumer reads the time; a bridge.Clock is one.
type Clock interface {
	// Now is time.Now.
	Now() time.Time
}

// realClock is the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// settings is a Config with its defaults, and what it takes from the dispatch.Config.
type settings struct {
	Config
	lanes    []dispatch.Lane
	claimFor time.Duration
	skew     time.Duration // the dispatcher's MaxClockSkew
}

// settle validates cfg and the parts of dc a Sink and a Consumer use, and returns them
// with their defaults.
func settle(dc dispatch.Config, cfg Config) (settings, error) {
	errs := []error{cfg.validate()}
	bad := func(field, must string, got any) {
		errs = append(errs, fmt.Errorf("%w: dispatch.Config.%s must %s, got %v", ErrInvalidConfig, field, must, got))
	}
	if len(dc.Lanes) == 0 {
		bad("Lanes", "hold at least one lane", "none")
	}
	s := settings{Config: cfg.withDefaults(), claimFor: dc.ClaimFor, skew: dc.MaxClockSkew}
	seen := map[dispatch.Lane]int{}
	for i, lc := range dc.Lanes {
		if j, dup := seen[lc.Lane]; dup {
			bad(fmt.Sprintf("Lanes[%d].Lane", i), fmt.Sprintf("differ from Lanes[%d].Lane", j), fmt.Sprintf("%q", lc.Lane))
			continue
		}
		if err := tenancy.ValidateID("lane", string(lc.Lane)); err != nil {
			bad(fmt.Sprintf("Lanes[%d].Lane", i), "be a valid lane name", fmt.Sprintf("%q", lc.Lane))
			continue
		}
		seen[lc.Lane] = i
		s.lanes = append(s.lanes, lc.Lane)
	}
	if dc.ClaimFor <= 0 {
		bad("ClaimFor", "be positive", dc.ClaimFor)
	}
	if dc.MaxClockSkew < 0 {
		bad("MaxClockSkew", "not be negative", dc.MaxClockSkew)
	}
	if s.skew == 0 {
		s.skew = dispatch.DefaultMaxClockSkew
	}
	return s, errors.Join(errs...)
}

// withDefaults returns c with every zero knob set to its default.
func (c Config) withDefaults() Config {
	or(&c.Prefix, DefaultPrefix)
	or(&c.InFlight, DefaultInFlight)
	or(&c.InHand, DefaultInHand)
	or(&c.WaitTime, DefaultWaitTime)
	or(&c.ScanEvery, DefaultScanEvery)
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
	if len(c.Prefix) > MaxPrefix || strings.IndexFunc(c.Prefix, func(r rune) bool { return !tokenByte(r) && r != '_' }) >= 0 {
		bad("Prefix", fmt.Sprintf("be at most %d ASCII letters, digits, '-' and '_'", MaxPrefix), fmt.Sprintf("%q", c.Prefix))
	}
	if c.InFlight < 0 || c.InFlight > duework.MaxLimit {
		bad("InFlight", fmt.Sprintf("be in [0, %d]", duework.MaxLimit), c.InFlight)
	}
	if c.InHand < 0 || c.InHand > duework.MaxLimit {
		bad("InHand", fmt.Sprintf("be in [0, %d]", duework.MaxLimit), c.InHand)
	}
	if c.RunTime < 0 {
		bad("RunTime", "not be negative", c.RunTime)
	}
	if c.WaitTime != 0 && (c.WaitTime < time.Second || c.WaitTime > 20*time.Second || c.WaitTime%time.Second != 0) {
		bad("WaitTime", "be 0 or whole seconds from 1s to 20s", c.WaitTime)
	}
	if c.ScanEvery < 0 {
		bad("ScanEvery", "not be negative", c.ScanEvery)
	}
	return errors.Join(errs...)
}

// capacity is how many items one lane may hold, visible or in flight.
func (s settings) capacity() int {
	rounds := 1
	if s.RunTime > 0 {
		margin := min(bridge.DefaultClaimMargin, s.claimFor/4)
		rounds = max(1, int((s.claimFor-margin)/s.RunTime))
	}
	return int(min(int64(s.InFlight)*int64(rounds), duework.MaxLimit))
}

// receiveVisibility is the visibility timeout, in seconds, of a message once received:
// no claim dispatched with ClaimFor can outlast it.
func (s settings) receiveVisibility() int32 { return s.visibility(s.claimFor) }

// visibility is the visibility timeout, in seconds, of a message whose claim has left
// for: it ends VisibilitySlack after the claim, on any clock of the fleet.
func (s settings) visibility(left time.Duration) int32 {
	d := min(max(left, 0)+s.skew+VisibilitySlack, MaxVisibility)
	return int32(math.Ceil(d.Seconds()))
}

// QueueName is the name of lane's queue: Prefix (DefaultPrefix when zero) followed by
// the lane, whose ASCII letters, digits and '-' stay as they are and whose every other
// byte becomes '_' and two upper-case hex digits. A name that would pass SQS's 80
// characters is cut, between escapes, and followed by "_h" and 16 hex digits of the lane's
// SHA-256, so distinct lanes always have distinct queues.
func (c Config) QueueName(lane dispatch.Lane) string {
	prefix := c.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < len(lane); i++ {
		if ch := lane[i]; tokenByte(rune(ch)) {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "_%02X", ch)
		}
	}
	name := b.String()
	if len(name) <= maxQueueName {
		return name
	}
	cut := maxQueueName - 18
	for k := 1; k <= 2; k++ { // never inside an escape
		if name[cut-k] == '_' {
			cut -= k
			break
		}
	}
	sum := sha256.Sum256([]byte(lane))
	return name[:cut] + "_h" + hex.EncodeToString(sum[:8])
}

// maxQueueName is the longest name SQS gives a queue.
const maxQueueName = 80

// tokenByte reports whether r stands for itself in a queue name.
func tokenByte(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

// isLaneQueue reports whether name, under prefix, reads as some lane's queue: the rest
// is letters, digits, '-' and escapes ('_' and two upper-case hex digits), possibly ending
// in a cut's "_h" and 16 lower-case hex digits.
func isLaneQueue(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch {
		case tokenByte(rune(rest[i])):
		case rest[i] == '_' && i+2 < len(rest) && isUpperHex(rest[i+1]) && isUpperHex(rest[i+2]):
			i += 2
		case rest[i] == '_' && len(rest)-i == 18 && rest[i+1] == 'h' && strings.Trim(rest[i+2:], "0123456789abcdef") == "":
			return true
		default:
			return false
		}
	}
	return true
}

func isUpperHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'A' && b <= 'F' }
