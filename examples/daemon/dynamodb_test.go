package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// dynamoTable returns a config on a fresh table at the test endpoint
// (ROTA_TEST_DYNAMODB_ENDPOINT, by default DynamoDB Local as .ci/services starts it), and
// drops the table when t ends. Without an endpoint answering, t is skipped, except under
// CI=true, where it fails.
func dynamoTable(t *testing.T) config {
	t.Helper()
	cfg := testConfig()
	cfg.dynamoEndpoint = os.Getenv("ROTA_TEST_DYNAMODB_ENDPOINT")
	if cfg.dynamoEndpoint == "" {
		cfg.dynamoEndpoint = "http://127.0.0.1:8000"
	}
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(cfg.dynamoEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)}); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no DynamoDB at %s: %v (CI=true: the tests must run)", cfg.dynamoEndpoint, err)
		}
		t.Skipf("no DynamoDB at %s (%v); .ci/services starts DynamoDB Local there, or set ROTA_TEST_DYNAMODB_ENDPOINT", cfg.dynamoEndpoint, err)
	}
	var b [6]byte
	rand.Read(b[:])
	cfg.table = "rota-daemon-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &cfg.table}) })
	return cfg
}

// On DynamoDB, two replicas over one table share the index, the watch lists, the plans and
// the maintenance state: both do work, neither unschedules the other's sources, the
// maintenance task runs, and both stop cleanly with nothing left claimed.
func TestDaemonTwoReplicasOnDynamoDB(t *testing.T) {
	checkTwoReplicas(t, dynamoTable(t), pruneTask.Name)
}
