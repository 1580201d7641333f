package maintenancetest

// tb is the part of testing.TB the rules use, so the suite's own tests can run a rule
// against a broken implementation and see it fail.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}
