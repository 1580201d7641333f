package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// api is the part of *dynamodb.Client the stores use. Tests put a wrapper between.
type api interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var _ api = (*dynamodb.Client)(nil)

// Capacity is a count of capacity units: read units and write units, as DynamoDB bills
// them on demand (read and write request units).
type Capacity struct {
	Read, Write float64
}

// meter sums the capacity the service reports for every call of the stores of one
// OpenStores.
type meter struct {
	mu sync.Mutex
	c  Capacity
}

// add records what one call consumed. A service that splits its report into read and
// write units is taken at its word; one that reports only CapacityUnits (DynamoDB Local)
// has them counted as the call's kind: reads for a read, writes for a write.
func (m *meter) add(write bool, ccs ...types.ConsumedCapacity) {
	var r, w float64
	for _, cc := range ccs {
		switch {
		case cc.ReadCapacityUnits != nil || cc.WriteCapacityUnits != nil:
			r += deref(cc.ReadCapacityUnits)
			w += deref(cc.WriteCapacityUnits)
		case write:
			w += deref(cc.CapacityUnits)
		default:
			r += deref(cc.CapacityUnits)
		}
	}
	m.mu.Lock()
	m.c.Read += r
	m.c.Write += w
	m.mu.Unlock()
}

func (m *meter) total() Capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// refusedWriteUnits is what a single-item write refused by its condition costs, which the
// service does not report: one write unit for an item of up to 1 KB, and every item of
// this table is smaller.
const refusedWriteUnits = 1

// db is the client of one table with its meter: every call asks for the consumed
// capacity and records it.
type db struct {
	c     api
	table string
	m     *meter
}

var total = types.ReturnConsumedCapacityTotal

func (d *db) get(ctx context.Context, k map[string]av, consistent bool, projection ...string) (map[string]av, error) {
	in := &dynamodb.GetItemInput{TableName: &d.table, Key: k, ConsistentRead: &consistent, ReturnConsumedCapacity: total}
	project(&in.ProjectionExpression, &in.ExpressionAttributeNames, projection)
	out, err := d.c.GetItem(ctx, in)
	if err != nil {
		return nil, err
	}
	d.record(false, out.ConsumedCapacity)
	return out.Item, nil
}

func (d *db) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	in.TableName, in.ReturnConsumedCapacity = &d.table, total
	out, err := d.c.UpdateItem(ctx, in)
	if err != nil {
		d.refused(err)
		return nil, err
	}
	d.record(true, out.ConsumedCapacity)
	return out, nil
}

func (d *db) put(ctx context.Context, in *dynamodb.PutItemInput) error {
	in.TableName, in.ReturnConsumedCapacity = &d.table, total
	out, err := d.c.PutItem(ctx, in)
	if err != nil {
		d.refused(err)
		return err
	}
	d.record(true, out.ConsumedCapacity)
	return nil
}

func (d *db) delete(ctx context.Context, in *dynamodb.DeleteItemInput) error {
	in.TableName, in.ReturnConsumedCapacity = &d.table, total
	out, err := d.c.DeleteItem(ctx, in)
	if err != nil {
		d.refused(err)
		return err
	}
	d.record(true, out.ConsumedCapacity)
	return nil
}

func (d *db) query(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	in.TableName, in.ReturnConsumedCapacity = &d.table, total
	out, err := d.c.Query(ctx, in)
	if err != nil {
		return nil, err
	}
	d.record(false, out.ConsumedCapacity)
	return out, nil
}

// transact runs one TransactWriteItems of actions on the table.
func (d *db) transact(ctx context.Context, actions []types.TransactWriteItem) error {
	for i := range actions {
		setTable(&actions[i], &d.table)
	}
	out, err := d.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions, ReturnConsumedCapacity: total})
	if err != nil {
		return err
	}
	d.m.add(true, out.ConsumedCapacity...)
	return nil
}

func setTable(a *types.TransactWriteItem, table *string) {
	switch {
	case a.Put != nil:
		a.Put.TableName = table
	case a.Update != nil:
		a.Update.TableName = table
	case a.Delete != nil:
		a.Delete.TableName = table
	case a.ConditionCheck != nil:
		a.ConditionCheck.TableName = table
	}
}

// batchGet reads the items of keys, strongly consistent, in batches of 100, retrying
// what the service leaves unprocessed. The items come back in no particular order.
func (d *db) batchGet(ctx context.Context, keys []map[string]av, projection ...string) ([]map[string]av, error) {
	var out []map[string]av
	for len(keys) > 0 {
		n := min(len(keys), 100)
		ka := types.KeysAndAttributes{Keys: keys[:n], ConsistentRead: ptr(true)}
		project(&ka.ProjectionExpression, &ka.ExpressionAttributeNames, projection)
		keys = keys[n:]
		for attempt := 0; len(ka.Keys) > 0; attempt++ {
			res, err := d.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{d.table: ka}, ReturnConsumedCapacity: total})
			if err != nil {
				return nil, err
			}
			d.m.add(false, res.ConsumedCapacity...)
			out = append(out, res.Responses[d.table]...)
			ka.Keys = res.UnprocessedKeys[d.table].Keys
			if err := pause(ctx, attempt, len(ka.Keys) > 0); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// batchWrite writes requests in batches of 25, retrying what the service leaves
// unprocessed. It is not atomic.
func (d *db) batchWrite(ctx context.Context, requests []types.WriteRequest) error {
	for len(requests) > 0 {
		n := min(len(requests), 25)
		batch := requests[:n]
		requests = requests[n:]
		for attempt := 0; len(batch) > 0; attempt++ {
			res, err := d.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{d.table: batch}, ReturnConsumedCapacity: total})
			if err != nil {
				return err
			}
			d.m.add(true, res.ConsumedCapacity...)
			batch = res.UnprocessedItems[d.table]
			if err := pause(ctx, attempt, len(batch) > 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// pause waits before the next attempt of a retry loop, when again: a few milliseconds
// that grow with attempt, with jitter.
func pause(ctx context.Context, attempt int, again bool) error {
	if !again {
		return nil
	}
	return sleep(ctx, time.Duration(1+rand.IntN(1<<min(attempt, 6)))*time.Millisecond)
}

func (d *db) record(write bool, cc *types.ConsumedCapacity) {
	if cc != nil {
		d.m.add(write, *cc)
	}
}

// refused counts a single-item write that its condition refused, which reports no
// capacity but is billed.
func (d *db) refused(err error) {
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		d.m.add(true, types.ConsumedCapacity{WriteCapacityUnits: ptr(float64(refusedWriteUnits))})
	}
}

func ptr[T any](v T) *T { return &v }

// project sets a projection expression naming attrs (through placeholders, since some
// attribute names are reserved words).
func project(expr **string, names *map[string]string, attrs []string) {
	if len(attrs) == 0 {
		return
	}
	if *names == nil {
		*names = map[string]string{}
	}
	s := ""
	for i, a := range attrs {
		p := fmt.Sprintf("#p%d", i)
		(*names)[p] = a
		if i > 0 {
			s += ", "
		}
		s += p
	}
	*expr = &s
}

// conditionFailed reports whether err is a single-item write refused by its condition.
func conditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// cancelled returns the reasons of a cancelled transaction, one per action, or nil when
// err is not one.
func cancelled(err error) []types.CancellationReason {
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		if tc.CancellationReasons == nil {
			return []types.CancellationReason{}
		}
		return tc.CancellationReasons
	}
	return nil
}

// reasonCode returns the code of a cancellation reason ("None" when it has none).
func reasonCode(r types.CancellationReason) string {
	if r.Code == nil {
		return "None"
	}
	return *r.Code
}

// errConflict is what a write reports when another write changed what it read first: it
// is retried from the read (see retry).
var errConflict = errors.New("rotadynamo: conflicting write")

// maxAttempts bounds how often a read-compute-write is retried after conflicts.
const maxAttempts = 64

// retry runs f until it returns something other than errConflict, at most maxAttempts
// times, pausing a little longer after each conflict; a transaction cancelled only for
// a conflict with another transaction counts as one.
func retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if !isConflict(err) {
			return err
		}
		if attempt == maxAttempts-1 {
			return fmt.Errorf("rotadynamo: gave up after %d conflicting writes: %w", maxAttempts, err)
		}
		if err := pause(ctx, attempt, true); err != nil {
			return err
		}
	}
}

// isConflict reports whether err is errConflict or a transaction cancelled only because
// another transaction was writing the same items at once.
func isConflict(err error) bool {
	if errors.Is(err, errConflict) {
		return true
	}
	reasons := cancelled(err)
	if len(reasons) == 0 {
		var tce *types.TransactionConflictException
		return errors.As(err, &tce)
	}
	conflict := false
	for _, r := range reasons {
		switch reasonCode(r) {
		case "None":
		case "TransactionConflict":
			conflict = true
		default:
			return false
		}
	}
	return conflict
}

// interpret wraps a backend error as the error of op ("Index.Claim"): a done ctx as ctx's
// error, everything else as it is. It is the one place where backend errors are mapped.
func interpret(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("rotadynamo: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("rotadynamo: %s: %w", op, err)
}
