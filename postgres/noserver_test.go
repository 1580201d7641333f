package postgres_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Without a reachable server the tests skip and say how to run them — except under CI,
// where they fail. Checked by running one of this package's tests in a child process
// pointed at a port where nothing listens.
func TestNoServerSkipsUnlessCI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	run := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExampleSteps$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(),
			"ROTA_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
			"CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("")
	if err != nil || !strings.Contains(out, "--- SKIP: TestExampleSteps") || !strings.Contains(out, "ROTA_TEST_DATABASE_URL") {
		t.Errorf("without a server and without CI: %v\n%s\nwant a skip that names ROTA_TEST_DATABASE_URL", err, out)
	}
	out, err = run("true")
	if err == nil || !strings.Contains(out, "--- FAIL: TestExampleSteps") || !strings.Contains(out, "CI=true") {
		t.Errorf("without a server under CI=true: %v\n%s\nwant a failure", err, out)
	}
}
