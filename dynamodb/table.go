package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrTableShape is returned by OpenStores when the table exists but is not one it can
// use: other key attributes or types, an index missing or of another shape, or another
// Buckets than StoresConfig gives.
var ErrTableShape = errors.New("rotadynamo: the table has another shape")

// tableVersion is the version of the table's layout, kept in its meta item; a table of
// another version is refused.
const tableVersion = 1

// indexSpec is one secondary index as the stores need it.
type indexSpec struct {
	name     string
	local    bool
	hash     string // the partition key attribute (attrPK for a local index)
	rng      string // the sort key attribute
	included []string
}

// indexes are the table's secondary indexes: two local, four global, every one keyed by
// strings and holding only keys (and, for the paused users, the pause).
var indexes = []indexSpec{
	{name: idxDue, local: true, hash: attrPK, rng: attrLDue},
	{name: idxClaims, local: true, hash: attrPK, rng: attrLClaim},
	{name: idxQueue, hash: attrQueueKey, rng: attrQueueSK},
	{name: idxDueUsers, hash: attrDueKey, rng: attrDueSK},
	{name: idxPaused, hash: attrPausedKey, rng: attrPausedSK, included: []string{attrPausedUntil, attrPauseReason, attrServed}},
	{name: idxTenants, hash: attrTenantsKey, rng: attrTenantsSK},
}

func (s indexSpec) keySchema() []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: ptr(s.hash), KeyType: types.KeyTypeHash},
		{AttributeName: ptr(s.rng), KeyType: types.KeyTypeRange},
	}
}

func (s indexSpec) projection() *types.Projection {
	if len(s.included) == 0 {
		return &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
	}
	return &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: s.included}
}

// createTableInput is the table the stores create: on-demand, keyed by (pk, sk).
func createTableInput(table string) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: ptr(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: ptr(attrSK), KeyType: types.KeyTypeRange},
		},
	}
	for _, a := range keyAttributes() {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: ptr(a), AttributeType: types.ScalarAttributeTypeS})
	}
	for _, s := range indexes {
		if s.local {
			in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
				IndexName: ptr(s.name), KeySchema: s.keySchema(), Projection: s.projection()})
			continue
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: ptr(s.name), KeySchema: s.keySchema(), Projection: s.projection()})
	}
	return in
}

// keyAttributes lists every attribute that keys the table or an index.
func keyAttributes() []string {
	out := []string{attrPK, attrSK}
	for _, s := range indexes {
		for _, a := range []string{s.hash, s.rng} {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// ensureTable creates the table unless it exists, waits until it is active, and checks
// its shape. Several processes may call it at once: one creates, the others wait.
func ensureTable(ctx context.Context, c api, table string) error {
	desc, err := describe(ctx, c, table)
	if err != nil {
		return err
	}
	if desc == nil {
		_, err := c.CreateTable(ctx, createTableInput(table))
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("creating table %s: %w", table, err)
		}
	}
	for attempt := 0; desc == nil || desc.TableStatus != types.TableStatusActive; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		if desc, err = describe(ctx, c, table); err != nil {
			return err
		}
	}
	return checkShape(desc)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// describe returns the table's description, or nil when it does not exist.
func describe(ctx context.Context, c api, table string) (*types.TableDescription, error) {
	out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing table %s: %w", table, err)
	}
	return out.Table, nil
}

// checkShape refuses a table whose keys or indexes are not those createTableInput makes.
// Further indexes and attributes of the host's are allowed.
func checkShape(d *types.TableDescription) error {
	var problems []string
	want := createTableInput("")
	if !sameKeys(d.KeySchema, want.KeySchema) {
		problems = append(problems, "its key is not (pk, sk)")
	}
	types_ := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		types_[deref0(a.AttributeName)] = a.AttributeType
	}
	for _, a := range keyAttributes() {
		if t, ok := types_[a]; ok && t != types.ScalarAttributeTypeS {
			problems = append(problems, fmt.Sprintf("attribute %s is of type %s, not S", a, t))
		}
	}
	for _, s := range indexes {
		if p := checkIndex(d, s); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: table %s: %s", ErrTableShape, deref0(d.TableName), strings.Join(problems, "; "))
	}
	return nil
}

// checkIndex says what is wrong with the table's index s, or "".
func checkIndex(d *types.TableDescription, s indexSpec) string {
	var keys []types.KeySchemaElement
	var proj *types.Projection
	found := false
	if s.local {
		for _, x := range d.LocalSecondaryIndexes {
			if deref0(x.IndexName) == s.name {
				keys, proj, found = x.KeySchema, x.Projection, true
			}
		}
	} else {
		for _, x := range d.GlobalSecondaryIndexes {
			if deref0(x.IndexName) == s.name {
				keys, proj, found = x.KeySchema, x.Projection, true
			}
		}
	}
	switch {
	case !found:
		return fmt.Sprintf("index %s is missing", s.name)
	case !sameKeys(keys, s.keySchema()):
		return fmt.Sprintf("index %s is not keyed by (%s, %s)", s.name, s.hash, s.rng)
	case proj == nil || !coversProjection(*proj, *s.projection()):
		return fmt.Sprintf("index %s does not project what the stores read", s.name)
	}
	return ""
}

// coversProjection reports whether have projects at least what want does.
func coversProjection(have, want types.Projection) bool {
	switch {
	case have.ProjectionType == types.ProjectionTypeAll, want.ProjectionType == types.ProjectionTypeKeysOnly:
		return true
	case have.ProjectionType != types.ProjectionTypeInclude:
		return false
	}
	for _, a := range want.NonKeyAttributes {
		if !slices.Contains(have.NonKeyAttributes, a) {
			return false
		}
	}
	return true
}

func sameKeys(a, b []types.KeySchemaElement) bool {
	return slices.EqualFunc(a, b, func(x, y types.KeySchemaElement) bool {
		return deref0(x.AttributeName) == deref0(y.AttributeName) && x.KeyType == y.KeyType
	})
}

func deref0[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// claimMeta records buckets in the table's meta item unless one is there, and refuses a
// table whose meta item gives another Buckets or another layout version.
func claimMeta(ctx context.Context, d *db, buckets int) error {
	err := d.put(ctx, &dynamodb.PutItemInput{
		Item:                map[string]av{attrPK: sv(pkMeta), attrSK: sv(skMeta), "buckets": nv(int64(buckets)), "version": nv(tableVersion)},
		ConditionExpression: ptr("attribute_not_exists(pk)"),
	})
	if err == nil {
		return nil
	}
	if !conditionFailed(err) {
		return err
	}
	m, err := d.get(ctx, key(pkMeta, skMeta), true)
	if err != nil {
		return err
	}
	it := &item{m: m}
	got, version := it.int("buckets"), it.int("version")
	if it.err != nil {
		return it.err
	}
	switch {
	case version != tableVersion:
		return fmt.Errorf("%w: table %s has layout version %d, this package writes version %d", ErrTableShape, d.table, version, tableVersion)
	case got != int64(buckets):
		return fmt.Errorf("%w: table %s was created with Buckets %d, StoresConfig gives %d; every process sharing a table must give the same", ErrTableShape, d.table, got, buckets)
	}
	return nil
}
