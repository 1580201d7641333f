package rotasqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

var _ bridge.Sink = (*Sink)(nil)

// sendsAtOnce is the most SendMessageBatch calls one Send has in flight.
const sendsAtOnce = 8

// Sink hands a Dispatcher's items to SQS, one queue per lane, and says how many more each
// lane can take: a bridge.Sink for bridge.NewFeeder. Most dispatcher processes make one
// Sink and give it to a Feeder. A Sink is safe for concurrent use.
type Sink struct {
	client Client
	s      settings
	lanes  map[dispatch.Lane]bool
	queues *queues
}

// NewSink returns a Sink that sends through client to the queues of dc's lanes, as cfg
// describes. dc is the Dispatcher's configuration (dispatch.Dispatcher.Config, or the
// value given to dispatch.New): its Lanes name the queues and its ClaimFor and
// MaxClockSkew set how long a received message stays invisible. NewSink refuses a nil
// client, a dispatch.Config without valid lanes or ClaimFor, and a Config that cannot
// work, wrapping ErrInvalidConfig. It does no I/O: a lane's queue is found, or created when
// missing, by the first Room or Send that needs it, and again after a call finds it gone.
func NewSink(client Client, dc dispatch.Config, cfg Config) (*Sink, error) {
	s, err := settle(dc, cfg)
	if client == nil {
		err = errors.Join(fmt.Errorf("%w: NewSink's client must not be nil", ErrInvalidConfig), err)
	}
	if err != nil {
		return nil, err
	}
	sk := &Sink{client: client, s: s, lanes: map[dispatch.Lane]bool{}}
	sk.queues = newQueues(client, &sk.s)
	for _, l := range s.lanes {
		sk.lanes[l] = true
	}
	return sk, nil
}

// Room gives each lane its capacity less what its queue holds — messages visible, in
// flight (received and not yet deleted) and delayed, SQS's approximate counts, which
// count every dispatcher's sends and every worker's receipts. The capacity is InFlight ×
// (ClaimFor − margin) / RunTime, or InFlight for a zero RunTime: what the lane's workers
// can start before the claims end.
//
// SQS does not show who consumes a queue, so a lane has no room while its queue holds
// visible messages and none in flight: a live worker would have received some. When the
// workers stop, the dispatcher so stops claiming once the queue holds what was sent before
// it noticed — at most the capacity — and never queues an entry twice meanwhile. When the
// workers come back they drop, unrun, the messages whose claims have ended (see Consumer),
// and the entries are dispatched again.
//
// Room costs one GetQueueAttributes per lane, in parallel. A lane whose read fails has no
// room; the error names it, joined with the others'. With several dispatchers feeding one
// set of queues the bound is their number times the capacity.
func (sk *Sink) Room(ctx context.Context) (dispatch.Take, error) {
	t := dispatch.Take{PerLane: make(map[dispatch.Lane]int, len(sk.s.lanes))}
	rooms := make([]int, len(sk.s.lanes))
	errs := make([]error, len(sk.s.lanes))
	var wg sync.WaitGroup
	for i, l := range sk.s.lanes {
		wg.Go(func() {
			rooms[i], errs[i] = sk.laneRoom(ctx, l)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("rotasqs: room of lane %q: %w", l, errs[i])
			}
		})
	}
	wg.Wait()
	for i, l := range sk.s.lanes {
		t.PerLane[l] = rooms[i]
		t.Total += rooms[i]
	}
	return t, errors.Join(errs...)
}

// depthAttributes are the counts Room reads.
var depthAttributes = []types.QueueAttributeName{
	types.QueueAttributeNameApproximateNumberOfMessages,
	types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

// laneRoom is Room for one lane.
func (sk *Sink) laneRoom(ctx context.Context, lane dispatch.Lane) (int, error) {
	name := sk.s.QueueName(lane)
	url, err := sk.queues.url(ctx, name)
	if err != nil {
		return 0, err
	}
	out, err := sk.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: depthAttributes})
	if err != nil {
		sk.queues.forget(name, err)
		return 0, fmt.Errorf("read the depth of queue %q: %w", name, err)
	}
	var n [3]int
	for i, a := range depthAttributes {
		v, err := strconv.Atoi(out.Attributes[string(a)])
		if err != nil || v < 0 {
			return 0, fmt.Errorf("queue %q: attribute %s is %q, not a count", name, a, out.Attributes[string(a)])
		}
		n[i] = min(v, duework.MaxLimit)
	}
	visible, inFlight, delayed := n[0], n[1], n[2]
	if visible > 0 && inFlight == 0 {
		return 0, nil // no worker takes the lane's messages
	}
	return max(0, sk.s.capacity()-visible-inFlight-delayed), nil
}

// Send sends items to lane's queue, each encoded with bridge.EncodeItem and with its
// tenant as its MessageGroupId (see GroupID), so that SQS fair queues keep one tenant's
// backlog from delaying the others' in the lane. It sends them MaxBatch to a
// SendMessageBatch call, up to eight calls at once, and sends once more what a call failed.
// SQS keeps no order within a queue; the Dispatcher's order across lanes stands.
//
// It returns an error only when it sent none of the items — an unknown lane
// (ErrUnknownLane), the queue unreachable — so that the Feeder hands them all back. When
// only some fail (twice, or refused by EncodeItem or for being of another lane), Send logs
// them in one Warn line and returns nil: handing back a claim whose sibling may already be
// running elsewhere is not safe, while an item left unsent stays claimed until its claim
// ends and is then dispatched again.
func (sk *Sink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	if !sk.lanes[lane] {
		return fmt.Errorf("rotasqs: send %d items: lane %q: %w", len(items), lane, ErrUnknownLane)
	}
	if len(items) == 0 {
		return nil
	}
	name := sk.s.QueueName(lane)
	url, err := sk.queues.url(ctx, name)
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		errs   []error
		sent   int
		wg     sync.WaitGroup
		starts = make(chan struct{}, sendsAtOnce)
	)
	for lo := 0; lo < len(items); lo += MaxBatch {
		batch := items[lo:min(lo+MaxBatch, len(items))]
		starts <- struct{}{}
		wg.Go(func() {
			defer func() { <-starts }()
			n, batchErrs := sk.sendBatch(ctx, url, lane, batch)
			mu.Lock()
			sent += n
			errs = append(errs, batchErrs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	err = errors.Join(errs...)
	sk.queues.forget(name, err)
	if err == nil || sent == 0 {
		return err
	}
	sk.s.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: items left claimed unsent", slog.String("lane", string(lane)),
		slog.Int("items", len(items)-sent), slog.Any("error", err))
	return nil
}

// sendBatch sends up to MaxBatch items in one SendMessageBatch, and the entries it failed
// in one more, and returns how many were sent and why each other one was not.
func (sk *Sink) sendBatch(ctx context.Context, url string, lane dispatch.Lane, items []dispatch.Item) (sent int, errs []error) {
	var entries []types.SendMessageBatchRequestEntry
	for i, it := range items {
		if it.Lane != lane {
			errs = append(errs, fmt.Errorf("rotasqs: send %s: the item is of lane %q, not %q", name(it), it.Lane, lane))
			continue
		}
		body, err := bridge.EncodeItem(it)
		if err != nil {
			errs = append(errs, fmt.Errorf("rotasqs: send %s: %w", name(it), err))
			continue
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)),
			MessageGroupId: aws.String(GroupID(it.Claim.Entry.UserID))})
	}
	for try := 0; try < 2 && len(entries) > 0; try++ {
		out, err := sk.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			if try == 1 || ctx.Err() != nil || gone(err) {
				for _, e := range entries {
					errs = append(errs, fmt.Errorf("rotasqs: send %s: %w", name(items[index(e.Id)]), err))
				}
				return sent, errs
			}
			continue
		}
		sent += len(out.Successful)
		failed := map[string]types.BatchResultErrorEntry{}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = f
		}
		var again []types.SendMessageBatchRequestEntry
		for _, e := range entries {
			f, ok := failed[aws.ToString(e.Id)]
			switch {
			case !ok:
			case try == 0 && !f.SenderFault:
				again = append(again, e)
			default:
				errs = append(errs, fmt.Errorf("rotasqs: send %s: %s: %s", name(items[index(e.Id)]), aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
		entries = again
	}
	return sent, errs
}

// index is the item index an entry's Id holds.
func index(id *string) int {
	i, _ := strconv.Atoi(aws.ToString(id))
	return i
}

// maxGroupID is the longest MessageGroupId SQS takes.
const maxGroupID = 128

// GroupID is the MessageGroupId of a tenant's messages: its user ID when that is at most
// 128 printable ASCII characters, which SQS takes as they are, and otherwise "rota-h-"
// followed by 32 hex digits of the ID's SHA-256. Each tenant keeps one group, so SQS fair
// queues can tell a tenant with a backlog from the others.
func GroupID(userID string) string {
	if len(userID) <= maxGroupID && strings.IndexFunc(userID, func(r rune) bool { return r < '!' || r > '~' }) < 0 {
		return userID
	}
	sum := sha256.Sum256([]byte(userID))
	return "rota-h-" + hex.EncodeToString(sum[:16])
}

// name names an item in errors and logs.
func name(it dispatch.Item) string {
	return fmt.Sprintf("user %q entry %q (claim %d)", it.Claim.Entry.UserID, it.Claim.Entry.WorkKey, it.Claim.Token)
}
