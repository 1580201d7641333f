package rotadynamo

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
)

// benchGroup is the lane, and group, of every fixture user.
const benchGroup = "free"

var benchT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// loadFixture writes, with batched writes and none of the Index's reads, users u000000…
// with perUser entries each, due at benchT0, every user routed to benchGroup: the items a
// Schedule of each entry and a Route of each user would leave (see
// TestFixtureAsTheIndexWritesIt).
func loadFixture(tb testing.TB, st *Stores, users, perUser int) {
	tb.Helper()
	ctx := context.Background()
	x := st.Index
	if err := x.noteGroup(ctx, benchGroup); err != nil {
		tb.Fatal(err)
	}
	const workers = 8
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			var reqs []types.WriteRequest
			for u := w; u < users; u += workers {
				reqs = append(reqs, fixtureItems(x, fmt.Sprintf("u%06d", u), perUser)...)
				if len(reqs) >= 500 {
					if errs[w] = x.d.batchWrite(ctx, reqs); errs[w] != nil {
						return
					}
					reqs = reqs[:0]
				}
			}
			errs[w] = x.d.batchWrite(ctx, reqs)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// fixtureItems returns the items of user with perUser entries due at benchT0, in group
// benchGroup.
func fixtureItems(x *Index, user string, perUser int) []types.WriteRequest {
	u := &userRec{id: user, stored: true, ver: 1, group: benchGroup, entries: perUser, freeAt: benchT0, firstDue: benchT0}
	m := key(userPK(user), skUser)
	m[attrVersion], m[attrGroup], m[attrEntries] = nv(u.ver), sv(u.group), nv(int64(u.entries))
	m[attrFreeAt], m[attrFirstDue] = tv(u.freeAt), tv(u.firstDue)
	b := x.bucket(user)
	m[attrQueueKey], m[attrQueueSK] = sv(queueKey(u.group, b)), sv(u.queueSK())
	m[attrDueKey], m[attrDueSK] = sv(dueKey(b)), sv(timeKey(u.firstDue, user))
	out := []types.WriteRequest{{PutRequest: &types.PutRequest{Item: m}}}
	for j := range perUser {
		e := &entryRec{e: duework.Entry{UserID: user, WorkKey: fmt.Sprintf("s%03d", j), Tier: "hot", DueAt: benchT0}}
		out = append(out, types.WriteRequest{PutRequest: &types.PutRequest{Item: e.item()}})
	}
	return out
}

// BenchmarkFairCycle measures what one item costs in capacity units when it is dispatched
// — read from its lane's queue, its user held, claimed — and completed, as a dispatcher's
// cycle and its workers drive the Index: every cycle a Ready of 100/perUser users (PerUser
// perUser, with a hold), a Claim of every entry they carry and one CompleteMany of them
// all, each entry due again at once, so that its user goes to the back of the queue and
// the cycles go round the users as a busy lane does. Each user has perUser entries. It
// reports the read and write units per item as DynamoDB bills them: every call's units as
// the endpoint reported them, but a transaction's as the table's units of each of its
// actions, sent one by one, twice over, and its indexes' units once — DynamoDB Local's
// report of a TransactWriteItems counts one action only (see BENCHMARKS.md).
//
// The fixtures of 100,000 entries take minutes to load on DynamoDB Local: -short skips the
// 100,000-user one, and the smoke run (-benchtime=1x, as CI runs every benchmark once) loads
// 100 users of 100 entries and 10,000 users of one instead, the sub-benchmarks' names saying
// so.
func BenchmarkFairCycle(b *testing.B) {
	sizes := []struct{ users, perUser int }{{1000, 1}, {1000, 10}, {1000, 100}, {100000, 1}}
	if smoke() {
		sizes[2].users, sizes[3].users = 100, 10000
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("users=%d/perUser=%d", size.users, size.perUser), func(b *testing.B) {
			if size.users > 1000 && testing.Short() {
				b.Skip("the large fixture takes minutes to load; skipped under -short")
			}
			benchFairCycle(b, size.users, size.perUser)
		})
	}
}

// smoke reports whether the benchmarks run once each (-benchtime=1x), as CI runs them.
func smoke() bool {
	f := flag.Lookup("test.benchtime")
	return f != nil && f.Value.String() == "1x"
}

func benchFairCycle(b *testing.B, users, perUser int) {
	ctx := context.Background()
	bill := &billed{}
	st := openTest(b, 1, func(a api) api { bill.api = a; return bill })
	loadFixture(b, st, users, perUser)
	x := st.Index
	now := benchT0.Add(time.Hour)
	q := duework.ReadyQuery{Group: benchGroup, Users: 100 / perUser, PerUser: perUser, Hold: time.Minute}
	cycle := func() int {
		now = now.Add(time.Millisecond)
		q.Now = now
		page, err := x.Ready(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		var keys []duework.Key
		for _, h := range page.Heads {
			for _, e := range h.Due {
				keys = append(keys, e.Key())
			}
		}
		claims, err := x.Claim(ctx, keys, now, now.Add(time.Hour))
		if err != nil || len(claims) != len(keys) || len(keys) == 0 {
			b.Fatalf("claimed %d of %d keys: %v", len(claims), len(keys), err)
		}
		done := make([]duework.Done, len(claims))
		for i, c := range claims {
			next := c.Entry
			next.LastRunAt, next.DueAt = now, now.Add(time.Microsecond)
			done[i] = duework.Done{Tenant: mustTenant(b, next.UserID), Claim: c, Next: next}
		}
		errs, err := x.CompleteMany(ctx, done)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return len(claims)
	}
	before := st.Capacity()
	b.ResetTimer()
	items := 0
	for items < b.N {
		items += cycle()
	}
	b.StopTimer()
	after := st.Capacity()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(items), "ns/op")
	b.ReportMetric((after.Read-before.Read)/float64(items), "rcu/item")
	b.ReportMetric((after.Write-before.Write)/float64(items), "wcu/item")
}

// billed is a client that sends each TransactWriteItems as its actions one by one, each
// with its condition, and reports what DynamoDB bills for the transaction: the table's
// units of every action twice (a transaction writes each item twice, to prepare and to
// commit) and the indexes' units once, as DynamoDB Local reports them for each action.
// DynamoDB Local's own report of a transaction counts one action only. It is for a
// benchmark that writes from one goroutine at a time per user: an action its condition
// refuses fails the call, the ones before it written.
type billed struct{ api }

func (c *billed) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var units float64
	for i, a := range in.TransactItems {
		var cc *types.ConsumedCapacity
		var err error
		switch {
		case a.Update != nil:
			u := a.Update
			var out *dynamodb.UpdateItemOutput
			out, err = c.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
				ExpressionAttributeValues: u.ExpressionAttributeValues, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
			if err == nil {
				cc = out.ConsumedCapacity
			}
		case a.Put != nil:
			p := a.Put
			var out *dynamodb.PutItemOutput
			out, err = c.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
				ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
				ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
			if err == nil {
				cc = out.ConsumedCapacity
			}
		case a.Delete != nil:
			d := a.Delete
			var out *dynamodb.DeleteItemOutput
			out, err = c.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: d.TableName, Key: d.Key, ConditionExpression: d.ConditionExpression,
				ExpressionAttributeNames: d.ExpressionAttributeNames, ExpressionAttributeValues: d.ExpressionAttributeValues,
				ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
			if err == nil {
				cc = out.ConsumedCapacity
			}
		default:
			err = fmt.Errorf("billed: action %d is a condition check, which this client cannot send alone", i)
		}
		if err != nil {
			return nil, fmt.Errorf("billed: action %d of %d: %w", i, len(in.TransactItems), err)
		}
		units += 2 * deref(cc.Table.CapacityUnits)
		for _, x := range cc.LocalSecondaryIndexes {
			units += deref(x.CapacityUnits)
		}
		for _, x := range cc.GlobalSecondaryIndexes {
			units += deref(x.CapacityUnits)
		}
	}
	return &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{{WriteCapacityUnits: &units, CapacityUnits: &units}}}, nil
}

// The benchmarks' fixture, written item by item, reads back as the same entries scheduled
// and users routed through the Index do: the same users, turns, heads and entries, and the
// same order for DueBefore.
func TestFixtureAsTheIndexWritesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	loaded, built := openTest(t, 2), openTest(t, 2)
	loadFixture(t, loaded, 5, 3)
	var routes []duework.Route
	for u := range 5 {
		id := fmt.Sprintf("u%06d", u)
		for j := range 3 {
			e := duework.Entry{UserID: id, WorkKey: fmt.Sprintf("s%03d", j), Tier: "hot", DueAt: benchT0}
			if err := built.Index.Schedule(ctx, mustTenant(t, id), e); err != nil {
				t.Fatal(err)
			}
		}
		routes = append(routes, duework.Route{UserID: id, Group: benchGroup})
	}
	if err := built.Index.Route(ctx, routes); err != nil {
		t.Fatal(err)
	}
	now := benchT0.Add(time.Minute)
	read := func(st *Stores) string {
		page, err := st.Index.Ready(ctx, duework.ReadyQuery{Group: benchGroup, Now: now, Users: 10, PerUser: 2})
		if err != nil {
			t.Fatal(err)
		}
		due, err := st.Index.DueBefore(ctx, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		u, err := st.Index.User(ctx, "u000003", now)
		if err != nil {
			t.Fatal(err)
		}
		es, err := st.Index.Entries(ctx, "u000003", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		groups, err := st.Index.Groups(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v\n%+v\n%+v\n%+v\n%v", page, due, u, es, groups)
	}
	if a, b := read(loaded), read(built); a != b {
		t.Fatalf("the fixture reads\n%s\nthe Index's writes read\n%s", a, b)
	}
}
