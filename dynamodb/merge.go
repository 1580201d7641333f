package rotadynamo

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// merge reads the per-bucket lists of one global index — a group's turn queues, the
// users by earliest DueAt, the paused users, the watch lists' tenants — from their heads,
// in pages, and yields their items in the order of their sort keys, as if they were one
// list: a k-way merge, so the order is exact whatever the number of buckets. Its reads are
// eventually consistent, as every read of a global index is.
type merge struct {
	d         *db
	rangeAttr string
	cursors   []*cursor
	page      int
}

// cursor is one bucket's list: what was read of it and not yet yielded, and where the
// next page starts.
type cursor struct {
	in   *dynamodb.QueryInput
	buf  []mergeItem
	done bool
}

// mergeItem is one item of a merged list: its sort key in the index, and its table key.
type mergeItem struct {
	sk, pk, tsk string
	m           map[string]av
}

// newMerge starts a merge of index's lists keyed hashes (on hashAttr), sorted on
// rangeAttr, each read from its head: with op ">" only the sort keys after bound, with
// "<" only those before it, with "" all of them; in pages of about page items.
func newMerge(d *db, index, hashAttr, rangeAttr string, hashes []string, op, bound string, page int) *merge {
	mg := &merge{d: d, rangeAttr: rangeAttr, page: max(page, 1)}
	for _, h := range hashes {
		var e expr
		cond := e.n(hashAttr) + " = " + e.v(sv(h))
		if op != "" {
			cond += " AND " + e.n(rangeAttr) + " " + op + " " + e.v(sv(bound))
		}
		in := &dynamodb.QueryInput{IndexName: ptr(index), KeyConditionExpression: &cond,
			ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}
		mg.cursors = append(mg.cursors, &cursor{in: in})
	}
	return mg
}

// fill reads the next page of every cursor whose buffer is empty and which has more,
// each in its own goroutine.
func (mg *merge) fill(ctx context.Context) error {
	var todo []*cursor
	for _, c := range mg.cursors {
		if len(c.buf) == 0 && !c.done {
			todo = append(todo, c)
		}
	}
	return parallel(ctx, len(todo), func(ctx context.Context, i int) error {
		c := todo[i]
		c.in.Limit = ptr(int32(min(mg.page, 1000)))
		out, err := mg.d.query(ctx, c.in)
		if err != nil {
			return err
		}
		for _, m := range out.Items {
			it := &item{m: m}
			c.buf = append(c.buf, mergeItem{sk: it.str(mg.rangeAttr), pk: it.str(attrPK), tsk: it.str(attrSK), m: m})
		}
		c.in.ExclusiveStartKey = out.LastEvaluatedKey
		c.done = out.LastEvaluatedKey == nil
		return nil
	})
}

// next returns the next item of the merged lists, and false when they are exhausted. It
// reads a bucket's next page only once what was read of it is used up.
func (mg *merge) next(ctx context.Context) (mergeItem, bool, error) {
	if err := mg.fill(ctx); err != nil {
		return mergeItem{}, false, err
	}
	best := -1
	for i, c := range mg.cursors {
		if len(c.buf) == 0 {
			continue
		}
		if best < 0 || less(c.buf[0], mg.cursors[best].buf[0]) {
			best = i
		}
	}
	if best < 0 {
		return mergeItem{}, false, nil
	}
	c := mg.cursors[best]
	it := c.buf[0]
	c.buf = c.buf[1:]
	return it, true, nil
}

// less orders merged items by sort key, then table key, bytewise.
func less(a, b mergeItem) bool {
	if c := strings.Compare(a.sk, b.sk); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.pk, b.pk); c != 0 {
		return c < 0
	}
	return a.tsk < b.tsk
}

// maxParallel bounds the requests one call has in flight at once.
const maxParallel = 16

// parallel runs f(ctx, i) for i in [0, n), at most maxParallel at once, and returns the
// first error; once one fails, the others' ctx is cancelled.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	switch n {
	case 0:
		return nil
	case 1:
		return f(ctx, 0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, maxParallel)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
