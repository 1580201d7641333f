package rotadynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotadynamo "github.com/rotaworks/rota/dynamodb"
	"github.com/rotaworks/rota/tenancy"
)

// Example opens the stores on a table (creating it on first use), schedules a tenant's
// sources, dispatches them and completes the batch. A service makes its client from its
// AWS configuration (config.LoadDefaultConfig and dynamodb.NewFromConfig); this one talks
// to DynamoDB Local on this machine.
//
// It has no Output comment because it needs that endpoint, and an Example cannot skip: go
// test compiles it but does not run it. TestExampleSteps runs the same steps against the
// test endpoint and checks what they print.
func Example() {
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:8000"),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	if err := exampleSteps(context.Background(), client, "rota", os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func exampleSteps(ctx context.Context, client *dynamodb.Client, table string, out io.Writer) error {
	st, err := rotadynamo.OpenStores(ctx, client, table, rotadynamo.StoresConfig{}) // on every replica at start-up
	if err != nil {
		return err
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	alice, err := tenancy.NewContext("alice")
	if err != nil {
		return err
	}
	for _, src := range []string{"blog", "changelog"} {
		e := duework.Entry{UserID: "alice", WorkKey: src, Tier: "hot", DueAt: now}
		if err := st.Index.Schedule(ctx, alice, e); err != nil {
			return err
		}
	}
	d, err := dispatch.New(st.Index, dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 1, PerCycleLimit: 100}},
		GlobalBatchLimit: 100,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "free", nil },
		ClaimFor:         5 * time.Minute,
	})
	if err != nil {
		return err
	}
	batch, err := d.Dispatch(ctx, now) // routes alice to "free", then serves her
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "shed:", batch.ShedUserIDs)
	var done []duework.Done
	for _, it := range batch.Items {
		// … run the item, then hand the entry back with its next due time.
		next := it.Claim.Entry
		next.LastRunAt, next.DueAt = now, now.Add(time.Hour)
		done = append(done, duework.Done{Tenant: alice, Claim: it.Claim, Next: next})
		fmt.Fprintln(out, "ran", it.Claim.Entry.UserID, it.Claim.Entry.WorkKey)
	}
	errs, err := st.Index.CompleteMany(ctx, done) // a transaction per user
	if err != nil {
		return err
	}
	c := st.Capacity()
	fmt.Fprintf(out, "consumed: %t\n", c.Read > 0 && c.Write > 0)
	return errors.Join(errs...)
}

// TestExampleSteps runs Example's steps on a table of its own.
func TestExampleSteps(t *testing.T) {
	t.Parallel()
	c := rotadynamo.TestClient(t)
	table := rotadynamo.TableName("rota-example")
	rotadynamo.DropTable(t, c, table)
	var out strings.Builder
	if err := exampleSteps(context.Background(), c, table, &out); err != nil {
		t.Fatal(err)
	}
	want := "shed: [alice]\nran alice blog\nconsumed: true\n"
	if out.String() != want {
		t.Fatalf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
