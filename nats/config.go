package rotanats

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrInvalidConfig is returned by NewSink and NewConsumer when a Config, or the part of a
// dispatch.Config they use, cannot work; the wrapping error names the field and its
// value, every problem joined.
var ErrInvalidConfig = errors.New("rotanats: invalid config")

// ErrStreamMismatch is returned by Consumer.Run when the stream already exists with
// settings that disagree with the worker's dispatch.Config: a duplicate window other than
// its ClaimFor, or subjects that do not take one of its lanes. The wrapping error names
// both values.
var ErrStreamMismatch = errors.New("rotanats: the stream disagrees with the worker's configuration")

// ErrUnknownLane is returned by Sink.Send for a lane the Dispatcher does not have.
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
	// StrayCheckEvery is the least time, on the Sink's Clock, between two of its searches
	// for messages on subjects that are not lanes.
	StrayCheckEvery = time.Minute
)

// maxToken is the longest lane token: a consumer name holds at most 255 bytes, and a
// subject stays short enough to read.
const maxToken = 64

// Config describes the queue between the dispatcher and its workers: one JetStream
// stream, a subject per lane, a durable pull consumer per lane that every worker process
// shares. The lanes and ClaimFor are not in it: NewSink reads them from its Dispatcher and
// NewConsumer from the worker's dispatch.Config, so the two sides cannot disagree on them
// unnoticed. Hand the same Stream and Subject to both sides; every field is optional, a
// zero one meaning its default.
type Config struct {
	// Stream names the stream, created when missing; zero means DefaultStream.
	Stream string
	// Subject is the subjects' prefix: lane L's items go to Subject + "." + the token of
	// L (see LaneToken). Zero means DefaultSubject. The stream takes Subject + ".*".
	Subject string
	// RunTime is how long one item typically holds a worker's slot, from its delivery to
	// its acknowledgement; the Sink's. The Sink lets each lane queue what the lane's
	// in-flight slots can start before the claims end: MaxAckPending × (ClaimFor −
	// margin) / RunTime items (see Sink.Room). Zero means one item per slot: the queue
	// holds at most MaxAckPending.
	RunTime time.Duration
	// MaxAckPending is, for each lane, the most messages delivered and not yet
	// acknowledged across every worker process: the fleet's in-flight bound, set on the
	// lane's consumer by Consumer.Run. The Sink reads it back from the consumer, so the
	// dispatcher follows what the workers declared. Zero means DefaultMaxAckPending.
	MaxAckPending int
	// InHand is how many messages of each lane one worker process holds at once:
	// fetched, waiting for a slot, running or being written; it is also the most one pull
	// asks for, and the items of one pull share the Worker's claim start. A few times the
	// Worker's slots keeps them busy between pulls; more lets one process take what
	// another could start sooner. Zero means DefaultInHand.
	InHand int
	// FetchWait is the longest one pull waits for messages: how soon a Consumer notices
	// that its context ended. Zero means DefaultFetchWait.
	FetchWait time.Duration
	// ShutdownTimeout bounds the Worker's stop that ends Consumer.Run: how long the items
	// running then may take to end and their completions to be written. Zero means
	// bridge.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Clock is where the Sink reads the time that decides staleness and paces its
	// searches for stray subjects, and where the Consumer reads each item's start; nil
	// means the real clock.
	Clock Clock
	// Logger receives the lines of the Sink and the Consumer; nil means slog.Default()
	// at the time NewSink or NewConsumer is called.
	Logger *slog.Logger
}

// withDefaults returns c with every zero knob set to its default.
func (c Config) withDefaults() Config {
	or(&c.Stream, DefaultStream)
	or(&c.Subject, DefaultSubject)
	or(&c.MaxAckPending, DefaultMaxAckPending)
	or(&c.InHand, DefaultInHand)
	or(&c.FetchWait, DefaultFetchWait)
	or(&c.ShutdownTimeout, bridge.DefaultShutdownTimeout)
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

// invalid is one rule broken, as ErrInvalidConfig wraps it.
func invalid(field, must string, got any) error {
	return fmt.Errorf("%w: %s must %s, got %v", ErrInvalidConfig, field, must, got)
}

// validate reports every rule c breaks, joined.
func (c Config) validate() error {
	var errs []error
	d := c.withDefaults()
	if err := checkStreamName(d.Stream); err != nil {
		errs = append(errs, invalid("Config.Stream", "be a stream name ("+err.Error()+")", fmt.Sprintf("%q", c.Stream)))
	}
	if err := checkSubject(d.Subject); err != nil {
		errs = append(errs, invalid("Config.Subject", "be a subject without wildcards ("+err.Error()+")", fmt.Sprintf("%q", c.Subject)))
	}
	for _, k := range []struct {
		name string
		v    time.Duration
	}{{"RunTime", c.RunTime}, {"FetchWait", c.FetchWait}, {"ShutdownTimeout", c.ShutdownTimeout}} {
		if k.v < 0 {
			errs = append(errs, invalid("Config."+k.name, "not be negative", k.v))
		}
	}
	if c.MaxAckPending < 0 {
		errs = append(errs, invalid("Config.MaxAckPending", "not be negative", c.MaxAckPending))
	}
	if c.InHand < 0 {
		errs = append(errs, invalid("Config.InHand", "not be negative", c.InHand))
	}
	return errors.Join(errs...)
}

// checkDispatch reports every rule dc breaks in what a Consumer takes from it — its lanes
// and ClaimFor — as dispatch.New would, joined.
func checkDispatch(dc dispatch.Config) error {
	var errs []error
	if len(dc.Lanes) == 0 {
		errs = append(errs, invalid("dispatch.Config.Lanes", "hold at least one lane", "none"))
	}
	seen := map[dispatch.Lane]int{}
	for i, lc := range dc.Lanes {
		field := fmt.Sprintf("dispatch.Config.Lanes[%d].Lane", i)
		if j, dup := seen[lc.Lane]; dup {
			errs = append(errs, invalid(field, fmt.Sprintf("differ from Lanes[%d].Lane", j), fmt.Sprintf("%q", lc.Lane)))
		} else if tenancy.ValidateID("lane", string(lc.Lane)) != nil {
			errs = append(errs, invalid(field, "be a valid lane name", fmt.Sprintf("%q", lc.Lane)))
		}
		seen[lc.Lane] = i
	}
	if dc.ClaimFor < time.Second {
		errs = append(errs, invalid("dispatch.Config.ClaimFor", "be at least 1s, the floor dispatch.New keeps", dc.ClaimFor))
	}
	return errors.Join(errs...)
}

// queue is the queue as one side sees it: its Config with the defaults, and the lanes
// and ClaimFor of the dispatcher's configuration.
type queue struct {
	Config
	lanes    []dispatch.Lane
	claimFor time.Duration
}

// newQueue is the queue of cfg for a Dispatcher configured with dc.
func newQueue(cfg Config, dc dispatch.Config) queue {
	q := queue{Config: cfg.withDefaults(), claimFor: dc.ClaimFor}
	for _, l := range dc.Lanes {
		q.lanes = append(q.lanes, l.Lane)
	}
	return q
}

// margin is how close to its end a claim makes a queued message stale: the margin a
// Runner applies with the default ClaimMargin, min(bridge.DefaultClaimMargin,
// ClaimFor/4).
func (q queue) margin() time.Duration { return min(bridge.DefaultClaimMargin, q.claimFor/4) }

// capacity is how many items one lane may hold unacknowledged, for a consumer whose
// MaxAckPending is maxAck.
func (q queue) capacity(maxAck int) int {
	rounds := 1
	if q.RunTime > 0 {
		rounds = max(1, int((q.claimFor-q.margin())/q.RunTime))
	}
	return min(maxAck*rounds, duework.MaxLimit)
}

// subject is the subject of lane's items.
func (q queue) subject(lane dispatch.Lane) string { return q.Subject + "." + LaneToken(lane) }

// streamConfig is the stream both sides declare.
func (q queue) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       q.Stream,
		Subjects:   []string{q.Subject + ".*"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: q.claimFor,
	}
}

// consumerConfig is the consumer of lane that the workers declare.
func (q queue) consumerConfig(lane dispatch.Lane) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       LaneToken(lane),
		Description:   "rota lane " + string(lane),
		FilterSubject: q.subject(lane),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.claimFor + AckSlack,
		MaxDeliver:    -1,
		MaxAckPending: q.MaxAckPending,
	}
}

// checkStream reports, wrapping ErrStreamMismatch, how an existing stream configured as
// sc disagrees with q: a duplicate window other than ClaimFor, a lane subject it does not
// take.
func (q queue) checkStream(sc jetstream.StreamConfig) error {
	var errs []error
	if sc.Duplicates != q.claimFor {
		errs = append(errs, fmt.Errorf("%w: stream %q has a duplicate window of %v, and the dispatcher declares it as its ClaimFor: "+
			"this worker's dispatch.Config.ClaimFor is %v", ErrStreamMismatch, q.Stream, sc.Duplicates, q.claimFor))
	}
	for _, l := range q.lanes {
		subj := q.subject(l)
		if !slices.ContainsFunc(sc.Subjects, func(p string) bool { return subjectMatches(p, subj) }) {
			errs = append(errs, fmt.Errorf("%w: stream %q takes subjects %q, not %q of this worker's lane %q",
				ErrStreamMismatch, q.Stream, sc.Subjects, subj, l))
		}
	}
	return errors.Join(errs...)
}

// subjectMatches reports whether subject, which has no wildcards, matches pattern: a "*"
// token matches any one token, a final ">" one or more.
func subjectMatches(pattern, subject string) bool {
	ps, ss := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range ps {
		switch {
		case p == ">" && i == len(ps)-1:
			return len(ss) > i
		case i >= len(ss):
			return false
		case p != "*" && p != ss[i]:
			return false
		}
	}
	return len(ps) == len(ss)
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

// errCodeSubjectsOverlap is the server's answer to a stream create whose subjects a
// stream already holds.
const errCodeSubjectsOverlap jetstream.ErrorCode = 10065

// createdMeanwhile reports whether err, the answer to a create of the stream, may mean
// that another process created it at that moment: the server then answers that its name
// is taken or, while that create is under way, that its subjects are. The caller looks
// the stream up again by name.
func createdMeanwhile(err error) bool {
	var je jetstream.JetStreamError
	if !errors.As(err, &je) || je.APIError() == nil {
		return false
	}
	code := je.APIError().ErrorCode
	return code == jetstream.JSErrCodeStreamNameInUse || code == errCodeSubjectsOverlap
}
