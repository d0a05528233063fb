package harness

// T is what the harness needs from a test: *testing.T satisfies it, and so
// does the demo's long-running supervisor, which keeps the cluster up after
// its setup and tears it down on demand.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}
